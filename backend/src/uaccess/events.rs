//! The caller's `ukevent` arrays: `kevent_ctl`'s, copied in and the changed span written
//! back ([`with_events_inout`]), and `kevent_get_events`'s, filled privately and written out
//! ([`with_events_out`]).

use std::cell::RefCell;
use std::mem::{MaybeUninit, size_of};

use kevent_sys::{Errno, kevent_id, ukevent};

use super::value::read_value;
use super::{Dir, Path, copy_via, fallback_in_use, path};

/// Entries `kevent_ctl` keeps on the stack (two arrays of them: 1280 bytes, below the page
/// that would need a stack probe) before heap buffers are used.
const INLINE: usize = 16;

/// The most events one fallback `kevent_get_events` returns through the C API (the private
/// buffer is this many entries at most; `min_nr` is clamped to it).
pub(crate) const MAX_OUT: usize = 4096;

pub(super) const ZERO_EVENT: ukevent = ukevent::new(0, kevent_id::from_u64(0), 0, 0);

/// Reads the `n` entries at the C caller's `user` into `slots` (exactly `n` long).
fn read_events(
    how: Path,
    slots: &mut [MaybeUninit<ukevent>],
    user: *const ukevent,
) -> Result<&mut [ukevent], Errno> {
    // SAFETY: `slots` is valid for writes of its length in entries.
    unsafe {
        copy_via(
            how,
            Dir::FromUser,
            slots.as_mut_ptr().cast(),
            user.addr(),
            std::mem::size_of_val(slots),
        )?
    };
    // SAFETY: the copy wrote every entry, and any bytes are a valid ukevent (`Plain`).
    Ok(unsafe { &mut *(slots as *mut [MaybeUninit<ukevent>] as *mut [ukevent]) })
}

/// Copies `src` into `slots` (exactly as long).
fn copy_events<'a>(slots: &'a mut [MaybeUninit<ukevent>], src: &[ukevent]) -> &'a [ukevent] {
    for (slot, ev) in slots.iter_mut().zip(src) {
        slot.write(*ev);
    }
    // SAFETY: every one of the entries (as many as `src`, which is as long) was just written.
    unsafe { &*(slots as *const [MaybeUninit<ukevent>] as *const [ukevent]) }
}

/// Room for `n` entries on the heap, uninitialized; `ENOMEM` if the heap refuses.
fn heap_slots(n: usize) -> Result<Vec<MaybeUninit<ukevent>>, Errno> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
    v.resize(n, MaybeUninit::uninit());
    Ok(v)
}

/// Whether two entries are the same bits (all 40 bytes: a ukevent has no padding), as five
/// word compares rather than a `memcmp` call per entry.
fn same_event(a: &ukevent, b: &ukevent) -> bool {
    let words = |e: &ukevent| {
        [
            e.id.as_u64(),
            u64::from(e.type_) | (u64::from(e.event) << 32),
            u64::from(e.req_flags) | (u64::from(e.ret_flags) << 32),
            u64::from(e.ret_data[0]) | (u64::from(e.ret_data[1]) << 32),
            e.cookie(),
        ]
    };
    let (a, b) = (words(a), words(b));
    // Not `a == b`: array equality becomes a `memcmp` call.
    a.iter().zip(&b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Writes `events` to the C caller's array at `user`.
fn write_events(how: Path, user: *mut ukevent, events: &[ukevent]) -> Result<(), Errno> {
    // SAFETY: `events` is valid for reads of its length in bytes; `copy_via` only reads it.
    unsafe {
        copy_via(
            how,
            Dir::ToUser,
            events.as_ptr().cast_mut().cast(),
            user.addr(),
            std::mem::size_of_val(events),
        )
    }
}

/// Runs `f` on a private copy of the `num` ukevents at the C caller's `user`, then writes back
/// the span of entries `f` changed (nothing if it changed none). `EFAULT` if the array is not
/// readable, or not writable where it changed.
///
/// When the copies would go through the pipe (the one path that creates file descriptors),
/// `validate` runs first and its error is the call's: the caller checks its queue fd there, so
/// that no fd is ever created for a call on a bad one (decision P22).
pub(crate) fn with_events_inout<R>(
    user: *mut ukevent,
    num: u32,
    validate: impl FnOnce() -> Result<(), Errno>,
    f: impl FnOnce(&mut [ukevent]) -> Result<R, Errno>,
) -> Result<R, Errno> {
    fallback_in_use();
    let n = num as usize;
    if n == 0 {
        return f(&mut []);
    }
    if user.is_null() {
        return Err(Errno::EFAULT);
    }
    let how = path();
    if how == Path::Pipe {
        validate()?;
    }
    if n <= INLINE {
        // The common case: two arrays on the stack, nothing to allocate or initialize.
        let mut work = [const { MaybeUninit::<ukevent>::uninit() }; INLINE];
        let mut orig = [const { MaybeUninit::<ukevent>::uninit() }; INLINE];
        let (Some(work), Some(orig)) = (work.get_mut(..n), orig.get_mut(..n)) else {
            return Err(Errno::EINVAL);
        };
        return inout(how, user, work, orig, f);
    }
    // Before allocating two arrays of `n` entries: a NULL or unmapped array is EFAULT, as the
    // kernel would answer, not ENOMEM for a huge `num` (the ends are probed here; the copy
    // below checks every byte).
    let last = (user as usize)
        .checked_add(n * size_of::<ukevent>() - 1)
        .ok_or(Errno::EFAULT)?;
    read_value(user.cast::<u8>().cast_const())?;
    read_value(last as *const u8)?;
    let mut work = heap_slots(n)?;
    let mut orig = heap_slots(n)?;
    inout(how, user, &mut work, &mut orig, f)
}

/// [`with_events_inout`] on two private arrays of `num` slots each.
fn inout<R>(
    how: Path,
    user: *mut ukevent,
    work: &mut [MaybeUninit<ukevent>],
    orig: &mut [MaybeUninit<ukevent>],
    f: impl FnOnce(&mut [ukevent]) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let events = read_events(how, work, user)?;
    let orig = copy_events(orig, events);
    let r = f(events);
    let changed = |(a, b): (&ukevent, &ukevent)| !same_event(a, b);
    let Some(first) = events.iter().zip(orig).position(changed) else {
        return r;
    };
    let last = events.iter().zip(orig).rposition(changed).unwrap_or(first);
    let span = events.get(first..=last).ok_or(Errno::EINVAL)?;
    write_events(how, user.wrapping_add(first), span)?;
    r
}

thread_local! {
    /// The private buffer of [`with_events_out`], kept per thread: an event loop that asks for
    /// 1024 events per call would otherwise allocate and zero 40 KiB every time. Its entries
    /// stay initialized (zeroed when it grows, then whatever the last call left).
    static OUT: RefCell<Vec<ukevent>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on a private buffer of `min(max_nr, MAX_OUT)` initialized ukevents; `f` returns
/// how many it filled, which are then written to the C caller's `user`. `EFAULT` if they
/// cannot be; nothing is written when `f` returns 0. A NULL `user` with `max_nr > 0` is
/// `EFAULT` before `f` runs (spec **D15**: the call must not wait, nor take events it could
/// never hand out); other addresses are checked only when there is something to write.
pub(crate) fn with_events_out(
    user: *mut ukevent,
    max_nr: u32,
    f: impl FnOnce(&mut [ukevent]) -> Result<u32, Errno>,
) -> Result<u32, Errno> {
    fallback_in_use();
    if user.is_null() && max_nr > 0 {
        return Err(Errno::EFAULT);
    }
    let n = (max_nr as usize).min(MAX_OUT);
    let how = path();
    let run = |buf: &mut Vec<ukevent>| -> Result<u32, Errno> {
        if buf.len() < n {
            buf.try_reserve_exact(n - buf.len())
                .map_err(|_| Errno::ENOMEM)?;
            buf.resize(n, ZERO_EVENT);
        }
        let events = buf.get_mut(..n).ok_or(Errno::EIO)?;
        let got = f(events)?;
        let filled = events.get(..got as usize).ok_or(Errno::EIO)?;
        write_events(how, user, filled)?;
        Ok(got)
    };
    // The per-thread buffer, or a fresh one if it is busy (a signal handler interrupted a call
    // on this thread) or gone (thread teardown).
    let mut run = Some(run);
    let cached = OUT.try_with(|cell| {
        let mut buf = cell.try_borrow_mut().ok()?;
        run.take().map(|run| run(&mut buf))
    });
    match (cached, run) {
        (Ok(Some(r)), _) => r,
        (_, Some(run)) => run(&mut Vec::new()),
        // `run` was taken only when the cached buffer was used.
        (_, None) => Err(Errno::EIO),
    }
}
