//! The rule numbers these docs cite, in one line each, so that they mean something outside
//! the repository.
//!
//! **Dn** are the rules of the kevent ABI v1 specification (`kevent-abi.md`, the project's
//! contract, not shipped in this crate); **Pn** are the kevent-for-Rust project's own
//! decisions where the specification is silent (`docs/decisions.md` in the project's
//! repository). Both hold on every backend, native and fallback, and each is checked by
//! name in the project's conformance suite.
//!
//! | rule | what it says |
//! |---|---|
//! | D2 | ADD of an unknown type, `NAIO`, or a type ADD never creates (`POSIX_TIMER`, `AIO`) fails that entry with `ENOSYS`. |
//! | D3 | A kevent's key is its type *and* its id: the same number under two types is two kevents. |
//! | D4 | A wait returns once `max(min, 1)` kevents are ready, the timeout passes, or a wake-up comes. |
//! | D5 | A wait's flags (`ABSTIME`) reach the queue. |
//! | D6 | There is no infinite timeout in the ABI: "forever" is a very large `tv_sec` ([`FOREVER_SECS`](crate::FOREVER_SECS)). |
//! | D7 | Level (the default): a socket, pipe or poll kevent whose source is still ready is delivered by every wait. |
//! | D8 | Occurrences (timer expiries, signals) that pile up before a delivery come as one event with a count. |
//! | D9 | An interval POSIX timer keeps firing. |
//! | D10 | An fd closed while registered is reported at most once, as BROKEN (`EBADF`), and never for a new file that reuses its number. |
//! | D11 | After `fork()` the child shares none of the parent's queues. |
//! | D12 | A ring of `n` slots holds at most `n - 1` uncommitted events. |
//! | D13 | A commit releases every ring slot before the committed index. |
//! | D14 | REMOVE and MODIFY return 0 once every entry was processed; each entry's own result is written back into it. |
//! | D15 | A wait with `min` above the capacity, a zero capacity or no buffer fails (`EINVAL`, `EFAULT`). |
//! | D17 | MODIFY re-evaluates a socket, pipe or poll source under its new mask, as `EPOLL_CTL_MOD` does. |
//! | P6 | A READY mark on a socket, pipe or poll kevent is re-checked at delivery with `LAST_CHECK`, delivered once as it is without. |
//! | P7 | A wake-up (`READY` with no entry) with nobody waiting makes the next wait return at once; it is not lost, and it is not a standing flag. |
//! | P17 | Closing a queue releases its SIGNAL kevents (the safe API removes them first, for the fallback, which cannot see a `close`). |
//! | P30 | [`Queue::add`](crate::Queue::add) registers a source that is ready at once (ALWAYS_QUEUE) and hands back every refused source; see its docs. |
//! | P31 | [`Timers`](crate::Timers): any number of deadlines over one TIMER kevent. |
