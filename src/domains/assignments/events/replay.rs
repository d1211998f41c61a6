//! Resumes: a lazy read of the feed, minute by minute and a page at a time,
//! skipping empty minutes through the minute index, under one byte budget
//! for the whole process; resumes that need the same page as of the same
//! moment (every subscriber behind one burst) share one read of it.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::Hash;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::{OnceCell, Semaphore, broadcast};
use tokio::time::Instant;

use super::{
    ASSIGNMENT_EVENT_MINUTES, ASSIGNMENT_EVENTS, Event, Events, Live, floor_id, is_event_id,
    millis, millis_of, minute_of,
};
use crate::kernel::error::{ApiError, ApiResult};
use crate::store::{Bound, Slice};

/// Rows a resume reads per page: the unit of the replay budget.
const REPLAY_PAGE: usize = 256;
/// Bytes set aside per row before a page is read (then set to what it holds).
const ROW_RESERVE: usize = 1024;
/// How long a page read for a resume stays at hand for other resumes that
/// need the table as of before that read (those behind the same burst), and
/// how many pages at most: only while no resume waits for their budget.
const KEEP_FOR: Duration = Duration::from_secs(10);
const KEEP_PAGES: usize = 256;

/// Bytes (counted in KiB) that replays may hold, shared by the whole process.
#[derive(Clone)]
pub(super) struct Budget {
    permits: Arc<Semaphore>,
    kib: u32,
    bytes: usize,
}

/// A part of the budget, given back when dropped.
struct Held {
    permits: Arc<Semaphore>,
    kib: u32,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.permits.add_permits(self.kib as usize);
    }
}

impl Budget {
    pub(super) fn new(bytes: usize) -> Self {
        let kib = u32::try_from(bytes / 1024).unwrap_or(u32::MAX).max(1);
        Budget {
            permits: Arc::new(Semaphore::new(kib as usize)),
            kib,
            bytes,
        }
    }

    /// KiB for `bytes`, never more than the whole budget (one page more than
    /// the budget still gets through, alone).
    fn kib_of(&self, bytes: usize) -> u32 {
        u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .min(self.kib)
    }

    async fn take(&self, bytes: usize, wait: Duration) -> Option<Held> {
        let kib = self.kib_of(bytes);
        let permit = tokio::time::timeout(wait, self.permits.clone().acquire_many_owned(kib))
            .await
            .ok()?
            .ok()?;
        permit.forget();
        Some(Held {
            permits: self.permits.clone(),
            kib,
        })
    }

    /// Makes `held` cover `bytes`: gives back what is over, or takes more
    /// (waiting up to `wait`; false when it cannot).
    async fn resize(&self, held: &mut Held, bytes: usize, wait: Duration) -> bool {
        let want = self.kib_of(bytes);
        if want <= held.kib {
            self.permits.add_permits((held.kib - want) as usize);
            held.kib = want;
            return true;
        }
        match self.take((want - held.kib) as usize * 1024, wait).await {
            Some(mut more) => {
                held.kib += more.kib;
                more.kib = 0;
                true
            }
            None => false,
        }
    }
}

/// Reads that concurrent readers share: a reader gets the read of its key
/// that some reader still holds, if that read began after the moment the
/// reader needs the store as of (`need`), else a read of its own.
pub(super) struct Shared<K, V> {
    slots: Mutex<HashMap<K, Weak<Slot<V>>>>,
}

pub(super) struct Slot<V> {
    began: Instant,
    value: OnceCell<V>,
}

impl<K: Hash + Eq, V> Shared<K, V> {
    pub(super) fn new() -> Self {
        Shared {
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The value of `key` as read after `need`, read by `read` unless a
    /// reader that shares it has read or is reading it.
    async fn get<F, Fut>(&self, key: K, need: Instant, read: F) -> ApiResult<Arc<Slot<V>>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ApiResult<V>>,
    {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            match slots.get(&key).and_then(Weak::upgrade) {
                Some(s) if s.began >= need => s,
                _ => {
                    // Forgotten reads are swept now and then, not on every insert.
                    if slots.len() >= 64 && slots.len().is_power_of_two() {
                        slots.retain(|_, w| w.strong_count() > 0);
                    }
                    let s = Arc::new(Slot {
                        began: Instant::now(),
                        value: OnceCell::new(),
                    });
                    slots.insert(key, Arc::downgrade(&s));
                    s
                }
            }
        };
        slot.value.get_or_try_init(read).await?;
        Ok(slot)
    }
}

impl<V> Slot<V> {
    fn value(&self) -> &V {
        self.value
            .get()
            .expect("a shared read is read before it is handed out")
    }
}

/// Where a page of a minute begins.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Lower {
    Start,
    At(String),
    After(String),
}

/// Pages kept after their readers moved on, with when they were read.
pub(super) type Kept = Mutex<VecDeque<(Instant, Arc<Slot<EventPage>>)>>;

/// A page of one minute's events, holding its part of the replay budget.
pub(super) struct EventPage {
    events: Vec<Arc<Event>>,
    /// Where the next page of the minute begins, if there is one.
    next: Option<Lower>,
    _held: Held,
}

impl Events {
    fn busy(&self) -> ApiError {
        ApiError::ReplayBusy(format!(
            "resuming subscriptions hold the whole replay budget (--replay-budget-bytes, {} bytes): subscribe again with the same `after` in a few seconds",
            self.budget.bytes
        ))
    }

    /// A page of `minute`'s events from `lower`, as read after `need`.
    async fn page(
        &self,
        minute: i64,
        lower: Lower,
        need: Instant,
    ) -> ApiResult<Arc<Slot<EventPage>>> {
        let key = (minute, lower.clone());
        let mut read_here = false;
        let slot = self
            .pages
            .get(key, need, || async {
                read_here = true;
                let wait = self.config.replay_wait;
                let reserve = REPLAY_PAGE * ROW_RESERVE;
                if self.budget.permits.available_permits() < self.budget.kib_of(reserve) as usize {
                    // Kept pages give their budget back to a resume that needs it.
                    self.kept.lock().unwrap_or_else(|p| p.into_inner()).clear();
                }
                let mut held = self
                    .budget
                    .take(reserve, wait)
                    .await
                    .ok_or_else(|| self.busy())?;
                let mut slice = Slice::partition(vec![minute.into()]).limit(REPLAY_PAGE);
                match lower {
                    Lower::Start => {}
                    Lower::At(id) => slice = slice.lower(Bound::Inclusive(id.into())),
                    Lower::After(id) => slice = slice.lower(Bound::Exclusive(id.into())),
                }
                let page = self.store.slice(&ASSIGNMENT_EVENTS, &slice).await?;
                let next = match (&page.next, page.rows.last()) {
                    (Some(_), Some(last)) => Some(Lower::After(last.string("id"))),
                    _ => None,
                };
                let events: Vec<Arc<Event>> = page
                    .rows
                    .iter()
                    .filter_map(Event::from_row)
                    .map(Arc::new)
                    .collect();
                drop(page);
                let bytes = events.iter().map(|e| e.bytes()).sum();
                if !self.budget.resize(&mut held, bytes, wait).await {
                    return Err(self.busy());
                }
                Ok(EventPage {
                    events,
                    next,
                    _held: held,
                })
            })
            .await?;
        if read_here {
            let now = Instant::now();
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            while kept
                .front()
                .is_some_and(|(at, _)| now.duration_since(*at) > KEEP_FOR)
                || kept.len() >= KEEP_PAGES
            {
                kept.pop_front();
            }
            kept.push_back((now, slot.clone()));
        }
        Ok(slot)
    }

    /// The minutes of `hour` that hold events, as listed after `need`.
    async fn busy_minutes(&self, hour: i64, need: Instant) -> ApiResult<Arc<Slot<Vec<i64>>>> {
        self.hours
            .get(hour, need, || async move {
                let slice = Slice::partition(vec![hour.into()]).limit(61);
                let page = self.store.slice(&ASSIGNMENT_EVENT_MINUTES, &slice).await?;
                Ok(page
                    .rows
                    .iter()
                    .filter_map(|r| r.bigint("minute"))
                    .collect())
            })
            .await
    }

    /// A replay of the events from `from_ms` (by id time), up to `until`
    /// (an id) or to the newest, as the table is after `need`.
    fn replay(&self, from_ms: i64, until: Option<String>, need: Instant) -> Replay {
        let now = self.now_ms();
        let lag = self.lag_ms();
        // Aligned to the lag, so resumes from nearby points share their reads.
        let aligned = from_ms - from_ms.rem_euclid(lag.max(1));
        let first = minute_of(aligned);
        let last = match until.as_deref().and_then(millis_of) {
            Some(u) => minute_of(u),
            None => minute_of(now + lag),
        };
        // Minutes this recent are read whatever the index says: its row and
        // the event are one batch, but a reader may see one before the other.
        let recent = minute_of(now - 2 * lag) - 1;
        let indexed = first..=(recent - 1).min(last);
        let hours = if indexed.is_empty() {
            RangeInclusive::new(1, 0)
        } else {
            indexed.start().div_euclid(60)..=indexed.end().div_euclid(60)
        };
        Replay {
            need,
            first,
            lower: floor_id(aligned),
            skip_below: floor_id(from_ms),
            until,
            indexed,
            hours,
            recent: recent.max(first)..=last,
            queue: VecDeque::new(),
            minute: None,
            page: None,
            at: 0,
        }
    }

    /// Every event `wanted` keeps from now on, or with `after` (an event id)
    /// from then on, without a gap: the receiver is taken before the replay
    /// is read, and a subscriber that falls behind the broadcast reads what
    /// it missed from the table (shared with the others that missed it).
    /// An `after` that is no event id is BAD_USER_INPUT; one older than the
    /// replay window REPLAY_TOO_OLD (the client reloads). A replay that finds
    /// no budget ends the stream with REPLAY_BUSY.
    pub fn follow(
        &self,
        after: Option<String>,
        wanted: impl Fn(&Event) -> bool + Send + Sync + 'static,
    ) -> ApiResult<BoxStream<'static, ApiResult<Arc<Event>>>> {
        let rx = self.tx.subscribe();
        let need = Instant::now();
        let now = self.now_ms();
        let lag = self.lag_ms();
        let replay = match &after {
            Some(id) if !is_event_id(id) => {
                return Err(ApiError::bad_input("`after` is not an event id"));
            }
            Some(id) => {
                let at = millis_of(id).unwrap_or(0);
                if at < now - millis(self.config.replay_window) {
                    return Err(ApiError::ReplayTooOld(format!(
                        "`after` is older than the replay window (--replay-window, {} s): load the page again and subscribe without `after`",
                        self.config.replay_window.as_secs()
                    )));
                }
                Some(self.replay(at - lag, None, need))
            }
            None => None,
        };
        let state = Follow {
            events: self.clone(),
            rx,
            wanted: Box::new(wanted),
            replay,
            held: None,
            lagged: false,
            sent: BTreeSet::new(),
            horizon: now - lag,
            ended: false,
        };
        Ok(futures::stream::unfold(state, |mut st| async move {
            if st.ended {
                return None;
            }
            match st.next().await {
                Ok(Some(e)) => Some((Ok(e), st)),
                Ok(None) => None,
                Err(e) => {
                    st.ended = true;
                    Some((Err(e), st))
                }
            }
        })
        .boxed())
    }
}

/// A lazy read of the feed, minute by minute, a page at a time.
struct Replay {
    need: Instant,
    /// The first minute and the id its first page starts at.
    first: i64,
    lower: String,
    /// Events before this id are read (pages are aligned) but not passed on.
    skip_below: String,
    until: Option<String>,
    /// Minutes taken from the index, and the index hours still to list.
    indexed: RangeInclusive<i64>,
    hours: RangeInclusive<i64>,
    /// Minutes read whatever the index says.
    recent: RangeInclusive<i64>,
    queue: VecDeque<i64>,
    minute: Option<i64>,
    /// The page being passed on, and the position in it.
    page: Option<Arc<Slot<EventPage>>>,
    at: usize,
}

impl Replay {
    /// The next event of the replay (of any portal), or None at its end.
    async fn next(&mut self, feed: &Events) -> ApiResult<Option<Arc<Event>>> {
        loop {
            if let Some(slot) = self.page.take() {
                let page = slot.value();
                if let Some(e) = page.events.get(self.at).cloned() {
                    self.at += 1;
                    self.page = Some(slot);
                    if self.until.as_ref().is_some_and(|u| e.id > *u) {
                        self.finish();
                        return Ok(None);
                    }
                    if e.id < self.skip_below {
                        continue;
                    }
                    return Ok(Some(e));
                }
                let next = page.next.clone();
                // Its budget is free for the next page (unless others share it).
                drop(slot);
                if let (Some(lower), Some(minute)) = (next, self.minute) {
                    self.page = Some(feed.page(minute, lower, self.need).await?);
                    self.at = 0;
                    continue;
                }
            }
            let Some(minute) = self.next_minute(feed).await? else {
                return Ok(None);
            };
            let lower = if minute == self.first {
                Lower::At(self.lower.clone())
            } else {
                Lower::Start
            };
            self.minute = Some(minute);
            self.page = Some(feed.page(minute, lower, self.need).await?);
            self.at = 0;
        }
    }

    async fn next_minute(&mut self, feed: &Events) -> ApiResult<Option<i64>> {
        loop {
            if let Some(m) = self.queue.pop_front() {
                return Ok(Some(m));
            }
            if let Some(hour) = self.hours.next() {
                let listed = feed.busy_minutes(hour, self.need).await?;
                let indexed = &self.indexed;
                self.queue
                    .extend(listed.value().iter().filter(|m| indexed.contains(m)));
                continue;
            }
            return Ok(self.recent.next());
        }
    }

    fn finish(&mut self) {
        self.queue.clear();
        self.hours = RangeInclusive::new(1, 0);
        self.recent = RangeInclusive::new(1, 0);
        self.page = None;
    }
}

/// One subscriber's place in the feed.
struct Follow {
    events: Events,
    rx: broadcast::Receiver<Live>,
    wanted: Box<dyn Fn(&Event) -> bool + Send + Sync>,
    replay: Option<Replay>,
    /// The first live event after falling behind, held until the replay of
    /// what the broadcast dropped before it is done.
    held: Option<Arc<Event>>,
    lagged: bool,
    /// Ids passed on that a replay or the tail may offer again.
    sent: BTreeSet<String>,
    /// From where the tail's passes this subscriber received read (or, before
    /// any, from where they would have): what it missed comes after this.
    horizon: i64,
    ended: bool,
}

impl Follow {
    async fn next(&mut self) -> ApiResult<Option<Arc<Event>>> {
        let lag = self.events.lag_ms();
        loop {
            let event = if let Some(replay) = &mut self.replay {
                match replay.next(&self.events).await? {
                    Some(e) => e,
                    None => {
                        self.replay = None;
                        continue;
                    }
                }
            } else if let Some(e) = self.held.take() {
                e
            } else {
                match self.rx.recv().await {
                    Ok(live) if self.lagged => {
                        // Everything the broadcast dropped was sent before
                        // this one: read from the table as of its pass.
                        self.lagged = false;
                        let pass = &live.pass;
                        self.replay = Some(self.events.replay(
                            self.horizon,
                            Some(pass.upto.clone()),
                            pass.read_at,
                        ));
                        self.horizon = self.horizon.max(pass.window_from);
                        self.held = Some(live.event);
                        continue;
                    }
                    Ok(live) => {
                        self.horizon = self.horizon.max(live.pass.window_from);
                        live.event
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.lagged = true;
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(None),
                }
            };
            if !(self.wanted)(&event) || !self.sent.insert(event.id.clone()) {
                continue;
            }
            // Ids older than any replay or tail window are never offered again.
            let floor = floor_id(event.millis().min(self.horizon) - 2 * lag);
            if self.sent.first().is_some_and(|f| *f < floor) {
                self.sent = self.sent.split_off(&floor);
            }
            return Ok(Some(event));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_millis(20);

    #[tokio::test]
    async fn the_budget_is_shared_clamped_and_given_back() {
        let budget = Budget::new(8 << 10);
        // More than the whole budget is the whole budget: one page still goes.
        let mut first = budget.take(64 << 10, WAIT).await.expect("the whole budget");
        assert!(budget.take(1, WAIT).await.is_none(), "nothing left");
        // What a page turns out to hold is all it keeps.
        assert!(budget.resize(&mut first, 3 << 10, WAIT).await);
        let second = budget.take(5 << 10, WAIT).await.expect("the rest");
        assert!(!budget.resize(&mut first, 4 << 10, WAIT).await, "none free");
        drop(second);
        assert!(budget.resize(&mut first, 4 << 10, WAIT).await);
        drop(first);
        assert!(budget.take(8 << 10, WAIT).await.is_some(), "all given back");
    }

    #[tokio::test]
    async fn a_read_is_shared_only_with_readers_that_need_no_later_one() {
        let shared: Shared<u8, u32> = Shared::new();
        let before = Instant::now();
        let first = shared.get(1, before, || async { Ok(1) }).await.unwrap();
        let joined = shared
            .get(1, before, || async { panic!("read again") })
            .await
            .unwrap();
        assert!(Arc::ptr_eq(&first, &joined));
        let later = Instant::now() + Duration::from_millis(1);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let fresh = shared.get(1, later, || async { Ok(2) }).await.unwrap();
        assert_eq!(
            *fresh.value(),
            2,
            "a reader that needs a later read gets one"
        );
        drop((first, joined, fresh));
        let after_all = shared.get(1, before, || async { Ok(3) }).await.unwrap();
        assert_eq!(*after_all.value(), 3, "a read nobody holds is forgotten");
    }
}
