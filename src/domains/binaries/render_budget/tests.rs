//! The fair-share accounting of the render budget, without a store or HTTP:
//! who goes first when room frees, what waits, what is refused, and that
//! nothing is left behind by a waiter that gives up.

use std::net::{Ipv4Addr, Ipv6Addr};

use futures::FutureExt as _;
use tokio::sync::mpsc;

use super::*;

fn ip(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, n))
}

fn limits(pixels: u64, share: u64, slots: usize, queue: usize) -> RenderLimits {
    RenderLimits {
        pixels_in_flight: pixels,
        share_per_client: share,
        slots,
        queue_per_client: queue,
        wait: Duration::from_secs(3600),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Lets every spawned waiter run until it blocks (one thread: nothing runs
/// while the test itself does not yield).
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// A render that must be let in at once.
fn now(budget: &RenderBudget, client: IpAddr, cost: u64) -> RenderPermit {
    budget
        .reserve(client, cost)
        .now_or_never()
        .expect("let in without waiting")
        .expect("let in")
}

/// Spawns a waiter that reports `label` with its permit when let in.
fn wait_in_line(
    budget: &RenderBudget,
    client: IpAddr,
    cost: u64,
    label: &'static str,
    out: &mpsc::UnboundedSender<(&'static str, RenderPermit)>,
) -> tokio::task::JoinHandle<()> {
    let (budget, out) = (budget.clone(), out.clone());
    tokio::spawn(async move {
        let permit = budget.reserve(client, cost).await.expect("let in");
        out.send((label, permit)).unwrap();
    })
}

#[test]
fn a_flooding_client_waits_in_its_own_queue_while_others_go_first() {
    runtime().block_on(async {
        let budget = RenderBudget::new(limits(1000, 100, 2, 8));
        let (out, mut admitted) = mpsc::unbounded_channel();
        let (a, b, c) = (ip(1), ip(2), ip(3));
        let a1 = now(&budget, a, 60);
        // A second render of A's would pass its share: it waits, though a slot is free.
        for label in ["a2", "a3", "a4", "a5", "a6"] {
            wait_in_line(&budget, a, 60, label, &out);
        }
        settle().await;
        assert_eq!(budget.load(), (60, 1, 5));
        assert!(admitted.try_recv().is_err());
        // Another client is let in at once, into the slot A may not take.
        let b1 = now(&budget, b, 60);
        // A third waits for a slot, and goes before A's queue when one frees.
        wait_in_line(&budget, c, 60, "c1", &out);
        settle().await;
        assert_eq!(budget.load(), (120, 2, 6));
        drop(a1);
        settle().await;
        let (first, c1) = admitted.try_recv().unwrap();
        assert_eq!(first, "c1", "the client served longest ago goes first");
        assert!(admitted.try_recv().is_err());
        drop(b1);
        settle().await;
        let (next, a2) = admitted.try_recv().unwrap();
        assert_eq!(next, "a2");
        // A's own renders come in order, one at a time within its share.
        drop((c1, a2));
        settle().await;
        let (next, _a3) = admitted.try_recv().unwrap();
        assert_eq!(next, "a3");
        assert!(admitted.try_recv().is_err());
        assert_eq!(budget.load(), (60, 1, 3));
    });
}

#[test]
fn a_render_larger_than_the_share_runs_alone_and_big_ones_are_not_passed() {
    runtime().block_on(async {
        let budget = RenderBudget::new(limits(1000, 100, 4, 8));
        let (out, mut admitted) = mpsc::unbounded_channel();
        let (a, b, c, d) = (ip(1), ip(2), ip(3), ip(4));
        // A client's first render may be larger than its share ...
        let _a1 = now(&budget, a, 500);
        // ... but nothing more of A's runs beside it.
        wait_in_line(&budget, a, 10, "a2", &out);
        let b1 = now(&budget, b, 400);
        // 200 more does not fit the budget; C waits, and D's small render,
        // which would fit, does not pass it.
        wait_in_line(&budget, c, 200, "c1", &out);
        settle().await;
        wait_in_line(&budget, d, 50, "d1", &out);
        settle().await;
        assert!(admitted.try_recv().is_err());
        assert_eq!(budget.load(), (900, 2, 3));
        drop(b1);
        settle().await;
        let (order, _running): (Vec<&str>, Vec<RenderPermit>) =
            std::iter::from_fn(|| admitted.try_recv().ok()).unzip();
        assert_eq!(order, ["c1", "d1"]);
        // Larger than the whole budget: refused before it waits.
        let refused = budget.reserve(a, 1001).now_or_never().expect("at once");
        assert_eq!(
            refused.err(),
            Some(Refusal::TooLarge {
                cost: 1001,
                budget: 1000
            })
        );
    });
}

#[test]
fn a_full_queue_and_a_long_wait_are_refused_and_leave_nothing_behind() {
    runtime().block_on(async {
        let budget = RenderBudget::new(RenderLimits {
            wait: Duration::from_millis(20),
            ..limits(1000, 100, 1, 2)
        });
        let (out, mut admitted) = mpsc::unbounded_channel();
        let (a, b) = (ip(1), ip(2));
        let a1 = now(&budget, a, 10);
        let waiting = [
            wait_in_line(&budget, a, 10, "a2", &out),
            wait_in_line(&budget, a, 10, "a3", &out),
        ];
        settle().await;
        // A third waiting render of A's is one more than its queue holds.
        let refused = budget.reserve(a, 10).now_or_never().expect("at once");
        assert_eq!(refused.err(), Some(Refusal::QueueFull { queue: 2 }));
        // Another client's queue is its own; its wait runs out while A holds the slot.
        let late = budget.reserve(b, 10).await;
        assert_eq!(
            late.err(),
            Some(Refusal::WaitedTooLong {
                wait: Duration::from_millis(20)
            })
        );
        assert_eq!(budget.load(), (10, 1, 2));
        // A waiter whose turn came but who left before taking it (its client
        // hung up) gives the turn back; the next one gets it.
        drop(a1);
        waiting[0].abort();
        settle().await;
        let (next, a3) = admitted.try_recv().unwrap();
        assert_eq!(next, "a3");
        assert_eq!(budget.load(), (10, 1, 0));
        drop(a3);
        assert_eq!(budget.load(), (0, 0, 0));
        assert!(
            budget.shared.lock().clients.is_empty(),
            "idle clients are forgotten"
        );
        // A waiter that gives up leaves its queue.
        let a1 = now(&budget, a, 10);
        let gone = wait_in_line(&budget, b, 10, "b1", &out);
        settle().await;
        assert_eq!(budget.load(), (10, 1, 1));
        gone.abort();
        settle().await;
        assert_eq!(budget.load(), (10, 1, 0));
        drop(a1);
        assert!(budget.shared.lock().clients.is_empty());
        assert!(budget.shared.lock().granted.is_empty());
    });
}

#[test]
fn a_client_is_an_ipv4_address_or_an_ipv6_slash_64() {
    let v6 = |s: &str, port| SocketAddr::new(s.parse::<Ipv6Addr>().unwrap().into(), port);
    assert_eq!(
        client_of(SocketAddr::new(Ipv4Addr::new(127, 0, 0, 2).into(), 5)),
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))
    );
    assert_eq!(
        client_of(v6("2001:db8:1:2:aaaa::1", 1)),
        client_of(v6("2001:db8:1:2:bbbb::7", 2))
    );
    assert_ne!(
        client_of(v6("2001:db8:1:2::1", 1)),
        client_of(v6("2001:db8:1:3::1", 1))
    );
    assert_eq!(
        client_of(v6("::ffff:10.0.0.1", 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))
    );
}
