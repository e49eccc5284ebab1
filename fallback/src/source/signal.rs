//! SIGNAL kevents: `id.raw[0]` is the signal number; `KEVENT_SIGNAL_NOMASK` in `raw_u64`
//! makes the signal reported only (no handler, no default action).
//!
//! Routing is process-wide (`crate::signal::dispatch`): a handler counts each delivery and
//! rings one shared eventfd doorbell, registered edge-triggered in every queue that has a
//! SIGNAL kevent. On a doorbell the queue compares each of its SIGNAL kevents' `seen` count
//! with the process-wide count; the difference is `ret_data[0]` (**D8**).

use kevent_sys::Errno;

use super::Source;
use crate::rules::Report;

/// A SIGNAL kevent's source; the signal number is checked when it is armed
/// (`dispatch::watch` answers `EINVAL` for signals that cannot be watched).
pub(crate) fn prepare(id: u64) -> Result<Source, Errno> {
    let (signo, nomask) = kevent_sys::kevent_id::from_u64(id).signal_parts();
    if signo <= 0 {
        return Err(Errno::EINVAL);
    }
    Ok(Source::Signal {
        signo,
        nomask,
        seen: 0,
    })
}

/// What a signal delivery reports.
pub(crate) fn report(count: u32) -> Report {
    Report::Ready([count, 0])
}
