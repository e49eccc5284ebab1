//! The D13 oracle ([`d13_commit_model`]) against the engine's formula.

use super::model::d13_commit_model;

/// Every state of small rings: the oracle and the engine's formula agree (released count,
/// consumer index, ring_over).
#[test]
fn d13_oracle_agrees_with_the_engine_on_small_rings() {
    for n in 2u32..=7 {
        let n64 = u64::from(n);
        for u in 0..3 * n64 {
            for k in u..u + n64 {
                for new_uidx in 0..n {
                    let new_u = d13_commit_model(k, u, n, new_uidx);
                    let over = (u / n64) as u32;
                    let c = kevent_sys::ring::commit(
                        n,
                        (k % n64) as u32,
                        (u % n64) as u32,
                        over,
                        new_uidx,
                        over,
                    )
                    .unwrap();
                    let what = format!("n {n} k {k} u {u} new_uidx {new_uidx}");
                    assert_eq!(u64::from(c.released), new_u - u, "{what}");
                    assert_eq!(u64::from(c.uidx), new_u % n64, "{what}");
                    assert_eq!(c.over, (new_u / n64) as u32, "{what}");
                }
            }
        }
    }
}

/// The oracle is independent of the formula it checks: an off-by-one in the formula's
/// wrap test (`uidx + released > n`, so a commit that ends exactly at the end of the array
/// does not increment `ring_over`) disagrees with the oracle's `ring_over`, `U / n`.
#[test]
fn d13_oracle_catches_an_off_by_one_wrap() {
    let (n, k, u, new_uidx) = (4u32, 4u64, 3u64, 0u32);
    let new_u = d13_commit_model(k, u, n, new_uidx);
    let (uidx, released, over) = (3u32, (new_u - u) as u32, 0u32);
    let wrong_over = if uidx + released > n { over + 1 } else { over };
    assert_eq!(new_u, 4);
    assert_ne!(wrong_over, (new_u / u64::from(n)) as u32);
}
