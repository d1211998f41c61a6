//! The answer's size budget (`--max-response-bytes`). Complexity weights
//! bound how many objects a query may ask for, but not how large they turn
//! out: a 320-byte query of aliased `children { parent { children } }`
//! answered 35 MB and built ~500 MB of values first. Every object and
//! scalar list the schema returns passes through [`Metered`], which adds
//! the size of what it just resolved to the request's [`ResponseBudget`];
//! the first object past the budget fails, and the gate then drops the
//! whole execution and answers RESPONSE_TOO_LARGE, so an answer too large
//! is never built further. `Metered` also yields to the runtime now and
//! then: resolving cached objects never awaits anything, and a future that
//! never yields cannot be stopped by the request's deadline or dropped when
//! its client leaves.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_graphql::parser::types::Field;
use async_graphql::registry::Registry;
use async_graphql::{ContextSelectionSet, OutputType, Positioned, ServerResult, Value};

use crate::api::graphql::gate::refusal;

/// The code of an answer stopped by its budget.
pub const RESPONSE_TOO_LARGE: &str = "RESPONSE_TOO_LARGE";

/// What one request's answer may hold, in bytes of its text and values.
#[derive(Clone)]
pub struct ResponseBudget(Arc<Inner>);

struct Inner {
    limit: usize,
    used: AtomicUsize,
    exceeded: AtomicBool,
    notify: tokio::sync::Notify,
}

impl ResponseBudget {
    pub fn new(limit: usize) -> Self {
        ResponseBudget(Arc::new(Inner {
            limit,
            used: AtomicUsize::new(0),
            exceeded: AtomicBool::new(false),
            notify: tokio::sync::Notify::new(),
        }))
    }

    /// Counts `bytes` more; false once the answer is over the limit.
    pub fn charge(&self, bytes: usize) -> bool {
        let used = self.0.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if used <= self.0.limit {
            return true;
        }
        if !self.0.exceeded.swap(true, Ordering::Relaxed) {
            self.0.notify.notify_waiters();
        }
        false
    }

    /// Completes once the budget has been exceeded.
    pub async fn exceeded(&self) {
        let notified = self.0.notify.notified();
        if self.0.exceeded.load(Ordering::Relaxed) {
            return;
        }
        notified.await;
    }

    /// Whether the answer went over the limit.
    pub fn is_exceeded(&self) -> bool {
        self.0.exceeded.load(Ordering::Relaxed)
    }

    /// The error an answer over the budget ends with.
    pub fn error(&self) -> async_graphql::ServerError {
        refusal(
            format!(
                "the answer grew past {} bytes (--max-response-bytes) and was stopped; ask for fewer items or fields",
                self.0.limit
            ),
            RESPONSE_TOO_LARGE,
        )
    }
}

/// An object (or a list of scalars) whose resolved value counts against
/// the request's [`ResponseBudget`]. It is the same GraphQL type as `T`.
pub struct Metered<T>(pub T);

impl<T: OutputType> OutputType for Metered<T> {
    fn type_name() -> Cow<'static, str> {
        T::type_name()
    }

    fn qualified_type_name() -> String {
        T::qualified_type_name()
    }

    fn introspection_type_name(&self) -> Cow<'static, str> {
        self.0.introspection_type_name()
    }

    fn create_type_info(registry: &mut Registry) -> String {
        T::create_type_info(registry)
    }

    async fn resolve(
        &self,
        ctx: &ContextSelectionSet<'_>,
        field: &Positioned<Field>,
    ) -> ServerResult<Value> {
        // A turn for the runtime every so often (tokio's cooperative budget),
        // before the work: the items of a list are resolved side by side,
        // and once the task's budget is spent the rest wait here, so the
        // deadline's timer and a hung-up client's drop take effect.
        tokio::task::consume_budget().await;
        let value = self.0.resolve(ctx, field).await?;
        if let Some(budget) = ctx.data_opt::<ResponseBudget>()
            && !budget.charge(own_size(&value))
        {
            return Err(budget.error());
        }
        Ok(value)
    }
}

/// The bytes `value` adds to an answer, without the objects nested in it
/// (each is metered itself): its keys, scalars and lists of scalars.
fn own_size(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 4 + nested_size(v))
                .sum::<usize>()
                + 2
        }
        other => nested_size(other),
    }
}

fn nested_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Boolean(_) => 5,
        Value::Number(_) => 12,
        Value::String(s) => s.len() + 2,
        Value::Enum(e) => e.len() + 2,
        Value::Binary(b) => b.len(),
        Value::List(items) => items.iter().map(nested_size).sum::<usize>() + 2,
        // Metered on its own.
        Value::Object(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use async_graphql::{EmptyMutation, EmptySubscription, Object, Schema};

    use super::*;

    static RESOLVED: AtomicUsize = AtomicUsize::new(0);

    struct Item(usize);

    #[Object]
    impl Item {
        async fn n(&self) -> usize {
            RESOLVED.fetch_add(1, Ordering::Relaxed);
            self.0
        }
        async fn label(&self) -> String {
            "x".repeat(100)
        }
    }

    struct Query;

    #[Object]
    impl Query {
        async fn items(&self, count: usize) -> Vec<Metered<Item>> {
            (0..count).map(|n| Metered(Item(n))).collect()
        }
    }

    fn schema() -> Schema<Query, EmptyMutation, EmptySubscription> {
        Schema::new(Query, EmptyMutation, EmptySubscription)
    }

    #[tokio::test]
    async fn an_answer_past_its_budget_fails_while_it_is_built() {
        let budget = ResponseBudget::new(10_000);
        let r = schema()
            .execute(
                async_graphql::Request::new("{ items(count: 1000) { label } }")
                    .data(budget.clone()),
            )
            .await;
        assert_eq!(
            r.errors[0].extensions.as_ref().unwrap().get("code"),
            Some(&Value::from(RESPONSE_TOO_LARGE))
        );
        assert!(budget.is_exceeded());
        let small = schema()
            .execute(
                async_graphql::Request::new("{ items(count: 10) { label } }")
                    .data(ResponseBudget::new(10_000)),
            )
            .await;
        assert!(small.errors.is_empty(), "{:?}", small.errors);
    }

    /// Resolving objects that await nothing used to run to the end in one
    /// poll: no deadline could stop it and a client that left did not.
    #[tokio::test(flavor = "current_thread")]
    async fn resolving_many_objects_yields_so_a_deadline_stops_it() {
        RESOLVED.store(0, Ordering::Relaxed);
        let schema = schema();
        let run = schema.execute("{ items(count: 200000) { n } }");
        let stopped = tokio::time::timeout(Duration::from_millis(20), run).await;
        assert!(
            stopped.is_err(),
            "the execution ran to its end within one poll"
        );
        let at_stop = RESOLVED.load(Ordering::Relaxed);
        assert!(at_stop < 200_000, "{at_stop}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            RESOLVED.load(Ordering::Relaxed),
            at_stop,
            "work went on after the drop"
        );
    }

    #[test]
    fn sizes_count_text_and_skip_nested_objects() {
        let v = async_graphql::value!({"id": "abc", "tags": ["a", "bb"], "child": {"id": "zzzzzzzzzz"}});
        let own = own_size(&v);
        assert!((20..60).contains(&own), "{own}");
    }
}
