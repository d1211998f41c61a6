//! The image-suggestion registry's batch commands: `suggestions list`,
//! `rollback` and `purge`.

use super::{Console, failed};
use crate::domains::suggestions::service::Suggestions;
use crate::kernel::roles::{Principal, Role};
use crate::store::DynStore;

/// The datasets of a wiki, a tab-separated line each, the current marked.
pub(super) async fn list(store: DynStore, wiki: &str, console: &mut Console) -> anyhow::Result<u8> {
    let service = Suggestions::new(store);
    let current = service.current(wiki).await.map_err(failed)?;
    console.out("dataset\tstate\trows\tbad lines\tstarted\tfinished\tsource");
    for d in service.datasets(wiki).await.map_err(failed)? {
        let mark = if current.as_deref() == Some(d.id.as_str()) {
            " (current)"
        } else {
            ""
        };
        console.out(format!(
            "{}{mark}\t{}\t{}\t{}\t{}\t{}\t{}",
            d.id,
            d.state.as_str(),
            d.rows,
            d.bad_lines,
            d.started,
            d.finished.unwrap_or_default(),
            d.source.unwrap_or_default()
        ));
    }
    Ok(0)
}

/// Makes the previous complete dataset current again.
pub(super) async fn rollback(
    store: DynStore,
    wiki: &str,
    console: &mut Console,
) -> anyhow::Result<u8> {
    let admin = Principal::local("suggestions", &[Role::Admin]);
    let d = Suggestions::new(store)
        .rollback(&admin, wiki)
        .await
        .map_err(failed)?;
    console.out(format!(
        "{wiki}: current dataset is now {} (started {})",
        d.id, d.started
    ));
    Ok(0)
}

/// Removes dead, failed and surplus datasets.
pub(super) async fn purge(
    store: DynStore,
    wiki: &str,
    keep: usize,
    dead_after: i64,
    console: &mut Console,
) -> anyhow::Result<u8> {
    let admin = Principal::local("suggestions", &[Role::Admin]);
    let purged = Suggestions::new(store)
        .with_dead_after(dead_after)
        .purge(&admin, wiki, keep)
        .await
        .map_err(failed)?;
    console.out(format!(
        "{wiki}: {} datasets purged {purged:?}",
        purged.len()
    ));
    Ok(0)
}
