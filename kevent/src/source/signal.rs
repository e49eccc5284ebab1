//! [`Signal`]: `KEVENT_SIGNAL`.

use kevent_sys::{KEVENT_SIGNAL, KEVENT_SIGNAL_DELIVERY, kevent_id};

use super::{Common, Kevent, NoFd, Source, source_common};

/// A signal kevent (`KEVENT_SIGNAL`): the signal was sent to the process.
///
/// Without [`Signal::nomask`] the signal is reported *and* delivered as usual (its handler
/// runs, or its default action happens: for most signals that ends the process). With it, the
/// signal is reported only. The two are different keys. Delivered events are
/// [`EventKind::Signal`](crate::EventKind::Signal) with the number of deliveries since the
/// last report (**D8**).
///
/// # Backends
///
/// Native: the kernel routes the signal. Fallback: a process-wide handler is installed when
/// the first kevent for a signal is added; a handler the program installs *afterwards*
/// (`sigaction`) replaces it, and the queue stops hearing of that signal.
///
/// ```
/// use kevent::{Queue, Signal, Timeout, Events, EventKind};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let _s = queue.add(Signal::new(libc::SIGUSR2).nomask())?.registration();
/// // SAFETY: raise(3) only sends a signal; with NOMASK it is reported, not acted on.
/// unsafe { libc::raise(libc::SIGUSR2) };
/// let mut events = Events::with_capacity(4);
/// queue.get_events(&mut events, 1, Timeout::FOREVER)?;
/// assert!(matches!(
///     events.get(0).map(|e| e.kind()),
///     Some(EventKind::Signal { signo: libc::SIGUSR2, nomask: true, .. })
/// ));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Signal {
    signo: i32,
    nomask: bool,
    common: Common,
}

impl Signal {
    /// Watches the signal `signo` (`SIGUSR1`, …). Signals that cannot be caught
    /// (`SIGKILL`, `SIGSTOP`) or invalid numbers fail with `EINVAL`.
    pub fn new(signo: i32) -> Signal {
        Signal {
            signo,
            nomask: false,
            common: Common::default(),
        }
    }

    /// `KEVENT_SIGNAL_NOMASK`: report the signal only; no handler runs and the default
    /// action does not happen.
    #[doc(alias = "KEVENT_SIGNAL_NOMASK")]
    pub fn nomask(mut self) -> Signal {
        self.nomask = true;
        self
    }
}

source_common!(Signal);

impl Source for Signal {
    type Fd = NoFd;

    fn into_kevent(self) -> Kevent<NoFd> {
        Kevent::new(
            KEVENT_SIGNAL,
            kevent_id::signal(self.signo, self.nomask),
            KEVENT_SIGNAL_DELIVERY,
            self.common,
            NoFd,
        )
    }
}
