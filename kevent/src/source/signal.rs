//! [`Signal`]: `KEVENT_SIGNAL`, and [`Signo`], a signal number.

use core::fmt;

use kevent_sys::{KEVENT_SIGNAL, KEVENT_SIGNAL_DELIVERY, kevent_id};

use super::{Common, Kevent, NoFd, Source, source_common};

/// A signal number: the named constants (`Signo::INT` is `SIGINT`), or any number with
/// [`Signo::from_raw`] (real-time signals). No `libc` needed.
///
/// `Debug` prints the C name (`SIGTERM`), or the number.
///
/// ```
/// use kevent::Signo;
/// assert_eq!(format!("{:?}", Signo::TERM), "SIGTERM");
/// assert_eq!(Signo::from_raw(Signo::USR1.raw()), Signo::USR1);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signo(i32);

/// Defines the named signal constants and their `Debug` names: one table.
macro_rules! signos {
    ($($(#[$m:meta])* $cname:literal => $name:ident = $value:expr;)*) => {
        impl Signo {
            $(
                #[doc = concat!("`", $cname, "`.")]
                ///
                $(#[$m])*
                #[doc(alias = $cname)]
                pub const $name: Signo = Signo($value);
            )*

            /// The C name (`"SIGINT"`) of a named signal.
            pub const fn name(self) -> Option<&'static str> {
                match self.0 {
                    $(v if v == $value => Some($cname),)*
                    _ => None,
                }
            }
        }
    };
}

signos! {
    /// Hang-up (a daemon's "reload").
    "SIGHUP" => HUP = libc::SIGHUP;
    /// Interrupt from the keyboard (Ctrl-C).
    "SIGINT" => INT = libc::SIGINT;
    /// Quit from the keyboard (Ctrl-\\).
    "SIGQUIT" => QUIT = libc::SIGQUIT;
    /// Write to a pipe with no reader.
    "SIGPIPE" => PIPE = libc::SIGPIPE;
    /// `alarm(2)`'s timer.
    "SIGALRM" => ALRM = libc::SIGALRM;
    /// Termination request (what `kill` sends by default).
    "SIGTERM" => TERM = libc::SIGTERM;
    /// User-defined signal 1.
    "SIGUSR1" => USR1 = libc::SIGUSR1;
    /// User-defined signal 2.
    "SIGUSR2" => USR2 = libc::SIGUSR2;
    /// A child stopped or exited.
    "SIGCHLD" => CHLD = libc::SIGCHLD;
    /// Continue if stopped.
    "SIGCONT" => CONT = libc::SIGCONT;
    /// Stop from the terminal (Ctrl-Z).
    "SIGTSTP" => TSTP = libc::SIGTSTP;
    /// Background read from the terminal.
    "SIGTTIN" => TTIN = libc::SIGTTIN;
    /// Background write to the terminal.
    "SIGTTOU" => TTOU = libc::SIGTTOU;
    /// Urgent data on a socket.
    "SIGURG" => URG = libc::SIGURG;
    /// The terminal window changed size.
    "SIGWINCH" => WINCH = libc::SIGWINCH;
    /// I/O is possible (`O_ASYNC`).
    "SIGIO" => IO = libc::SIGIO;
    /// A virtual timer expired.
    "SIGVTALRM" => VTALRM = libc::SIGVTALRM;
    /// A profiling timer expired.
    "SIGPROF" => PROF = libc::SIGPROF;
    /// CPU time limit exceeded.
    "SIGXCPU" => XCPU = libc::SIGXCPU;
    /// File size limit exceeded.
    "SIGXFSZ" => XFSZ = libc::SIGXFSZ;
    /// Power failure.
    "SIGPWR" => PWR = libc::SIGPWR;
    /// Cannot be caught: adding it fails with `EINVAL`.
    "SIGKILL" => KILL = libc::SIGKILL;
    /// Cannot be caught: adding it fails with `EINVAL`.
    "SIGSTOP" => STOP = libc::SIGSTOP;
}

impl Signo {
    /// Any signal number (a real-time signal, …). Numbers the system does not have fail at
    /// ADD with `EINVAL`.
    pub const fn from_raw(signo: i32) -> Signo {
        Signo(signo)
    }

    /// The number.
    pub const fn raw(self) -> i32 {
        self.0
    }
}

impl fmt::Debug for Signo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Signo({})", self.0),
        }
    }
}

impl From<Signo> for i32 {
    fn from(s: Signo) -> i32 {
        s.0
    }
}

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
/// the first kevent for a signal is added. A handler the program installs *afterwards*
/// (`sigaction`, `tokio::signal`, `ctrlc`, `signal-hook`) replaces it for a while: the
/// engine notices from its waits (within about a second while a thread waits), takes the
/// signal back and from then on calls the other handler after recording the delivery
/// (decision P34), so both hear of the signal; deliveries in between reach only the other
/// handler. Where every delivery must be
/// counted, use one mechanism per signal.
///
/// ```
/// use kevent::{Queue, Signal, Signo, Timeout, Events, EventKind};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let _s = queue.add(Signal::new(Signo::USR2).nomask())?;
/// // SAFETY: raise(3) only sends a signal; with NOMASK it is reported, not acted on.
/// unsafe { libc::raise(libc::SIGUSR2) };
/// let mut events = Events::with_capacity(4);
/// queue.wait(&mut events, Timeout::FOREVER)?;
/// assert!(matches!(
///     events.get(0).map(|e| e.kind()),
///     Some(EventKind::Signal { signo: Signo::USR2, nomask: true, .. })
/// ));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
#[doc(alias = "KEVENT_SIGNAL")]
pub struct Signal {
    signo: Signo,
    nomask: bool,
    common: Common,
}

impl Signal {
    /// Watches the signal `signo` ([`Signo::INT`], …). Signals that cannot be caught
    /// ([`Signo::KILL`], [`Signo::STOP`]) or invalid numbers fail with `EINVAL`.
    pub fn new(signo: Signo) -> Signal {
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
            kevent_id::signal(self.signo.raw(), self.nomask),
            KEVENT_SIGNAL_DELIVERY,
            self.common,
            NoFd,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(Signo::INT.raw(), libc::SIGINT);
        assert_eq!(Signo::INT.name(), Some("SIGINT"));
        assert_eq!(format!("{:?}", Signo::from_raw(40)), "Signo(40)");
    }
}
