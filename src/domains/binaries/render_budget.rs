//! One process-wide budget for IIIF renders that no cache or stored
//! derivative answers, counted in pixels in flight (the original's decoded
//! pixels plus the response's), and shared fairly between client addresses:
//! one client's many distinct variants wait in a short queue of their own
//! while every other client's renders go first to whatever room frees up.
//!
//! The rules, all under one lock:
//! - a render alone larger than the whole budget is refused before it waits;
//! - a client may add a render while its renders in flight stay within its
//!   share; its first render may be larger than the share (up to the budget),
//!   so every render the budget can hold runs some time;
//! - at most `slots` renders run at once (they hold the original's bytes);
//! - when room frees, the waiting client with the fewest pixels in flight (then
//!   the one served longest ago) goes next, and nobody passes it while it waits
//!   for room: big renders are never starved by small ones;
//! - a client has at most `queue_per_client` renders waiting, each for at most
//!   `wait`; beyond either it is told to come back later.
//!
//! A permit is owned and given back when dropped, so a render that outlives
//! its request (a client that hangs up) keeps its room until it ends.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use crate::kernel::error::ApiError;

/// How much rendering may be under way, and how it is shared.
#[derive(Clone, Copy, Debug)]
pub struct RenderLimits {
    /// Pixels all renders together may have in flight (`--render-pixels-in-flight`).
    pub pixels_in_flight: u64,
    /// Pixels one client address may have in flight once it has a render
    /// running (`--render-share-per-client`).
    pub share_per_client: u64,
    /// Renders running at once, whatever their size.
    pub slots: usize,
    /// Renders one client address may have waiting (`--render-queue-per-client`).
    pub queue_per_client: usize,
    /// Longest a render waits for its turn (`--render-wait`).
    pub wait: Duration,
}

impl Default for RenderLimits {
    fn default() -> Self {
        RenderLimits {
            // The largest render the other limits allow (a 100 M pixel
            // original, `--max-pixels`, made into a 40 M pixel response)
            // fits, with room for a small one beside it.
            pixels_in_flight: 200_000_000,
            share_per_client: 50_000_000,
            slots: 2,
            queue_per_client: 16,
            wait: Duration::from_secs(30),
        }
    }
}

/// Why a render was not let in.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// It alone needs more than the whole budget: it can never run.
    TooLarge { cost: u64, budget: u64 },
    /// The client already has as many renders waiting as it may.
    QueueFull { queue: usize },
    /// Its turn did not come within the wait.
    WaitedTooLong { wait: Duration },
}

impl Refusal {
    /// The client's error: 413 for what can never run, 503 (to be retried) otherwise.
    pub fn into_api_error(self) -> ApiError {
        match self {
            Refusal::TooLarge { cost, budget } => ApiError::PayloadTooLarge(format!(
                "rendering it takes about {cost} pixels (the original's decoded pixels plus the \
                 response's), more than the render budget of {budget} pixels \
                 (--render-pixels-in-flight); ask for a smaller size"
            )),
            Refusal::QueueFull { queue } => ApiError::limit(
                "RENDER_QUEUE_FULL",
                503,
                format!(
                    "this client address already has {queue} image renders waiting \
                     (--render-queue-per-client); retry once some have been answered"
                ),
            ),
            Refusal::WaitedTooLong { wait } => ApiError::limit(
                "RENDER_WAIT_EXCEEDED",
                503,
                format!(
                    "the image render waited {} s for its turn (--render-wait); retry later",
                    wait.as_secs_f64()
                ),
            ),
        }
    }
}

/// Whose share a request counts against: an IPv4 address, or the /64 of an
/// IPv6 one (a single IPv6 host is usually given a whole /64).
pub fn client_of(peer: SocketAddr) -> IpAddr {
    match peer.ip() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        },
    }
}

/// The budget; cheap to clone, one per process.
#[derive(Clone)]
pub struct RenderBudget {
    shared: Arc<Shared>,
}

struct Shared {
    limits: RenderLimits,
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent after every statement that can panic
        // (none do); a poisoned lock is taken over as it is.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Renders running and waiting, per client.
#[derive(Default)]
struct State {
    pixels: u64,
    running: usize,
    clients: HashMap<IpAddr, Client>,
    /// Tickets let in whose waiter has not yet picked its permit up.
    granted: HashSet<u64>,
    next_ticket: u64,
    /// Counts admissions: a client's last one orders clients with equal use.
    turns: u64,
}

#[derive(Default)]
struct Client {
    pixels: u64,
    running: usize,
    last_turn: u64,
    waiting: VecDeque<Waiter>,
}

struct Waiter {
    ticket: u64,
    cost: u64,
    wake: Arc<Notify>,
}

impl State {
    fn enqueue(&mut self, client: IpAddr, cost: u64, wake: Arc<Notify>) -> u64 {
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        self.clients
            .entry(client)
            .or_default()
            .waiting
            .push_back(Waiter { ticket, cost, wake });
        ticket
    }

    /// Lets in waiting renders in fair order while they fit.
    fn admit(&mut self, limits: &RenderLimits) {
        loop {
            let next = self
                .clients
                .iter()
                .filter_map(|(ip, c)| {
                    let head = c.waiting.front()?;
                    let within_share = c.running == 0
                        || c.pixels.saturating_add(head.cost) <= limits.share_per_client;
                    within_share.then_some((c.pixels, c.last_turn, head.ticket, *ip, head.cost))
                })
                .min();
            let Some((_, _, _, ip, cost)) = next else {
                return;
            };
            if self.running >= limits.slots
                || self.pixels.saturating_add(cost) > limits.pixels_in_flight
            {
                return;
            }
            self.turns += 1;
            let turn = self.turns;
            let client = self.clients.get_mut(&ip).expect("picked from the map");
            let waiter = client.waiting.pop_front().expect("it has a head");
            client.pixels += cost;
            client.running += 1;
            client.last_turn = turn;
            self.pixels += cost;
            self.running += 1;
            self.granted.insert(waiter.ticket);
            waiter.wake.notify_one();
        }
    }

    /// Gives a running render's room back.
    fn release(&mut self, client: IpAddr, cost: u64) {
        self.pixels -= cost;
        self.running -= 1;
        if let Some(c) = self.clients.get_mut(&client) {
            c.pixels -= cost;
            c.running -= 1;
        }
        self.forget_if_idle(client);
    }

    /// Takes a waiter out of its client's queue (it gave up).
    fn withdraw(&mut self, client: IpAddr, ticket: u64) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.waiting.retain(|w| w.ticket != ticket);
        }
        self.forget_if_idle(client);
    }

    fn forget_if_idle(&mut self, client: IpAddr) {
        if self
            .clients
            .get(&client)
            .is_some_and(|c| c.running == 0 && c.waiting.is_empty())
        {
            self.clients.remove(&client);
        }
    }
}

/// Room for one render, given back when dropped.
pub struct RenderPermit {
    shared: Arc<Shared>,
    client: IpAddr,
    cost: u64,
}

impl Drop for RenderPermit {
    fn drop(&mut self) {
        let mut s = self.shared.lock();
        s.release(self.client, self.cost);
        s.admit(&self.shared.limits);
    }
}

/// A render waiting for its turn; dropped before it got one (its client
/// hung up, or the wait ran out) it leaves the queue, and a turn given in
/// the meantime is handed back.
struct Queued {
    shared: Arc<Shared>,
    client: IpAddr,
    ticket: u64,
    cost: u64,
    done: bool,
}

impl Queued {
    fn take_turn(&mut self) -> Option<RenderPermit> {
        if !self.shared.lock().granted.remove(&self.ticket) {
            return None;
        }
        self.done = true;
        Some(RenderPermit {
            shared: self.shared.clone(),
            client: self.client,
            cost: self.cost,
        })
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut s = self.shared.lock();
        if s.granted.remove(&self.ticket) {
            s.release(self.client, self.cost);
        } else {
            s.withdraw(self.client, self.ticket);
        }
        s.admit(&self.shared.limits);
    }
}

impl RenderBudget {
    pub fn new(limits: RenderLimits) -> Self {
        RenderBudget {
            shared: Arc::new(Shared {
                limits: RenderLimits {
                    pixels_in_flight: limits.pixels_in_flight.max(1),
                    share_per_client: limits.share_per_client.max(1),
                    slots: limits.slots.max(1),
                    ..limits
                },
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Waits for room for a render of `cost` pixels for `client`, in its
    /// fair turn; refuses one that can never fit, or when the client's queue
    /// is full or the wait runs out.
    pub async fn reserve(&self, client: IpAddr, cost: u64) -> Result<RenderPermit, Refusal> {
        let limits = self.shared.limits;
        let cost = cost.max(1);
        if cost > limits.pixels_in_flight {
            return Err(Refusal::TooLarge {
                cost,
                budget: limits.pixels_in_flight,
            });
        }
        let wake = Arc::new(Notify::new());
        let mut queued = {
            let mut s = self.shared.lock();
            let ticket = s.enqueue(client, cost, wake.clone());
            s.admit(&limits);
            let waiting = s.clients.get(&client).map_or(0, |c| c.waiting.len());
            let queued = Queued {
                shared: self.shared.clone(),
                client,
                ticket,
                cost,
                done: false,
            };
            // Counted with itself: a queue of 0 means "run now or not at all".
            if !s.granted.contains(&ticket) && waiting > limits.queue_per_client {
                drop(s);
                drop(queued);
                return Err(Refusal::QueueFull {
                    queue: limits.queue_per_client,
                });
            }
            queued
        };
        let deadline = tokio::time::Instant::now() + limits.wait;
        loop {
            if let Some(permit) = queued.take_turn() {
                return Ok(permit);
            }
            if tokio::time::timeout_at(deadline, wake.notified())
                .await
                .is_err()
            {
                return queued
                    .take_turn()
                    .ok_or(Refusal::WaitedTooLong { wait: limits.wait });
            }
        }
    }

    /// Pixels in flight, renders running, renders waiting.
    #[cfg(test)]
    fn load(&self) -> (u64, usize, usize) {
        let s = self.shared.lock();
        let waiting = s.clients.values().map(|c| c.waiting.len()).sum();
        (s.pixels, s.running, waiting)
    }
}

#[cfg(test)]
mod tests;
