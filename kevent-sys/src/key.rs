//! [`Key`]: what names a kevent in its queue, the one definition every crate shares.

use core::fmt;

use crate::{KEVENT_SIGNAL, KEVENT_UNOTIFY, kevent_id, type_name, ukevent};

/// What names a kevent in its queue: its type and its id (**D3**: the type is part of the
/// key). REMOVE, MODIFY and READY look kevents up by key.
///
/// ```
/// use kevent_sys::Key;
/// let k = Key::user(42);
/// assert_eq!(k.id(), 42);
/// assert_eq!(format!("{k:?}"), "Key(UNOTIFY, 42)");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    type_: u32,
    id: u64,
}

impl Key {
    /// A key from the raw type (`KEVENT_*`) and id (`raw_u64`).
    pub const fn from_raw(type_: u32, id: u64) -> Key {
        Key { type_, id }
    }

    /// The key of a user event (`KEVENT_UNOTIFY`) with this id.
    pub const fn user(id: u64) -> Key {
        Key::from_raw(KEVENT_UNOTIFY, id)
    }

    /// The key of a signal kevent (`KEVENT_SIGNAL`) of the signal number `signo`; `nomask`
    /// is part of the id.
    pub fn signal(signo: impl Into<i32>, nomask: bool) -> Key {
        Key::from_raw(
            KEVENT_SIGNAL,
            kevent_id::signal(signo.into(), nomask).as_u64(),
        )
    }

    /// The key of an entry.
    pub const fn of(uk: &ukevent) -> Key {
        Key::from_raw(uk.type_, uk.id.as_u64())
    }

    /// The raw type (`KEVENT_SOCKET`, …).
    #[doc(alias = "type_")]
    pub const fn raw_type(&self) -> u32 {
        self.type_
    }

    /// The raw id (`raw_u64`).
    pub const fn id(&self) -> u64 {
        self.id
    }

    /// An entry naming this key, everything else zero (for REMOVE and READY).
    pub const fn to_ukevent(self) -> ukevent {
        ukevent::new(self.type_, kevent_id::from_u64(self.id), 0, 0)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match type_name(self.type_) {
            Some(n) => write!(f, "Key({n}, {})", self.id),
            None => write!(f, "Key({}, {})", self.type_, self.id),
        }
    }
}

impl From<&ukevent> for Key {
    fn from(uk: &ukevent) -> Key {
        Key::of(uk)
    }
}
