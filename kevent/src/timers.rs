//! [`Timers`]: any number of deadlines, with the same duration or not, multiplexed over one
//! `KEVENT_TIMER` kevent (decision P31).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use kevent_sys::{Errno, KEVENT_TIMER};

use crate::error::Result;
use crate::event::{Event, Key};
use crate::queue::Queue;
use crate::registration::Registration;
use crate::source::{NoFd, Timer};

/// Names one deadline of a [`Timers`]. Stale once the deadline expired or was cancelled: a
/// stale id names nothing, even after its slot is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId {
    slot: u32,
    generation: u32,
}

#[derive(Debug)]
struct Slot {
    /// The id's generation: bumped when the slot is freed.
    generation: u32,
    /// The deadline, while the slot is in use.
    deadline: Option<Instant>,
    /// The caller's token.
    token: u64,
    /// The heap entry that is live for this slot (older entries are skipped).
    entry: u32,
}

/// One heap entry: a deadline, its slot, and which of the slot's entries it is.
type Entry = Reverse<(Instant, u32, u32)>;

/// Deadlines multiplexed over one `KEVENT_TIMER` kevent (ONESHOT, re-armed at the earliest
/// deadline): as many timers as you like, with equal durations, cheap to move.
///
/// The ABI names a TIMER kevent by its interval (spec section 5), so a queue holds one timer
/// per interval, and moving a deadline is REMOVE + ADD. A server wants the opposite: a
/// deadline per connection, most of them the same idle timeout, moved on every request. This
/// module keeps the deadlines in user memory (a binary heap with lazy entries, over a slab)
/// and keeps **one** ONESHOT TIMER kevent armed at the earliest of them:
///
/// * [`Timers::insert`] and [`Timers::reset`] to a *later* time (the idle timeout's case)
///   make no system call; only a deadline earlier than the armed one re-arms the kevent
///   (REMOVE + ADD of one entry).
/// * [`Timers::cancel`] makes no system call.
/// * [`Timers::pop_expired`] hands out the tokens of the deadlines that have passed, then
///   re-arms the kevent at the next one.
///
/// The kernel (or the fallback engine) holds one timer per `Timers`, whatever the number of
/// deadlines.
///
/// Events of the driving kevent carry the token given to [`Timers::new`]; pass them to
/// [`Timers::handles`] (which saves a REMOVE), and call [`Timers::pop_expired`] after each
/// wait. Deadlines never fire early; they fire late by up to the resolution
/// ([`Timers::set_resolution`], 1 ms by default) plus the wait's latency.
///
/// ```
/// use std::time::{Duration, Instant};
/// use kevent::{Events, Queue, Timeout, Timers};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let mut timers = Timers::new(&queue, u64::MAX)?;
/// let idle = Duration::from_millis(5);
/// // Three connections with the same idle timeout: three deadlines, one kernel timer.
/// let ids: Vec<_> = (0..3)
///     .map(|conn| timers.insert(Instant::now() + idle, conn))
///     .collect::<Result<_, _>>()?;
/// // Activity on connection 1 pushes its deadline back: no system call.
/// timers.reset(ids[1], Instant::now() + 4 * idle)?;
/// let mut events = Events::with_capacity(8);
/// let mut expired = Vec::new();
/// while expired.len() < 3 {
///     queue.wait(&mut events, Timeout::FOREVER)?;
///     for event in &events {
///         timers.handles(&event);
///     }
///     while let Some((_, conn)) = timers.pop_expired()? {
///         expired.push(conn);
///     }
/// }
/// assert_eq!(expired[2], 1, "the reset deadline expires last");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Timers {
    queue: Queue,
    token: u64,
    slots: Vec<Slot>,
    free: Vec<u32>,
    heap: BinaryHeap<Entry>,
    live: usize,
    /// How late a deadline may be handed out, so that close deadlines share a wake-up.
    resolution: Duration,
    /// The clock's last reading by `pop_expired`.
    now: Instant,
    /// The driving kevent and the deadline it is armed for.
    driver: Option<(Registration<NoFd>, Instant)>,
}

/// The default resolution: 1 ms, tokio's timer granularity.
pub const DEFAULT_RESOLUTION: Duration = Duration::from_millis(1);

/// How many intervals one nanosecond apart an ADD of the driver tries when its interval is
/// taken (`EEXIST`) by another timer of the queue.
const EEXIST_TRIES: u32 = 64;

impl Timers {
    /// An empty set of deadlines on `queue`; its driving kevent's events carry `token`.
    /// Holds a handle of the queue ([`Queue::try_clone`]).
    ///
    /// # Errors
    ///
    /// None today (see [`Queue::try_clone`]).
    pub fn new(queue: &Queue, token: u64) -> Result<Timers> {
        Ok(Timers {
            queue: queue.try_clone()?,
            token,
            slots: Vec::new(),
            free: Vec::new(),
            heap: BinaryHeap::new(),
            live: 0,
            resolution: DEFAULT_RESOLUTION,
            now: Instant::now(),
            driver: None,
        })
    }

    /// Sets how late a deadline may be handed out (default [`DEFAULT_RESOLUTION`], 1 ms):
    /// the driving kevent is armed at the earliest deadline rounded up to this, so
    /// deadlines closer than it share one wake-up. `Duration::ZERO` arms at each deadline
    /// exactly. Deadlines are never handed out early either way.
    pub fn set_resolution(&mut self, resolution: Duration) {
        self.resolution = resolution;
    }

    /// The token of the driving kevent's events.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// How many deadlines are pending.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no deadline is pending.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Adds a deadline; `token` comes back from [`Timers::pop_expired`] when it passes.
    ///
    /// # Errors
    ///
    /// [`Op::Add`](crate::Op::Add) when the driving kevent had to be re-armed (the deadline
    /// is the earliest) and the ADD failed; the deadline is then not inserted.
    pub fn insert(&mut self, deadline: Instant, token: u64) -> Result<TimerId> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                // More than u32::MAX deadlines would exhaust memory long before.
                let s = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
                self.slots.push(Slot {
                    generation: 0,
                    deadline: None,
                    token: 0,
                    entry: 0,
                });
                s
            }
        };
        let generation = match self.slots.get_mut(slot as usize) {
            Some(s) => {
                s.deadline = Some(deadline);
                s.token = token;
                s.generation
            }
            None => 0,
        };
        self.live += 1;
        self.push(slot, deadline);
        let id = TimerId { slot, generation };
        if let Err(e) = self.arm_for(deadline) {
            // Not armed: the deadline is not kept either, so that the caller, who gets no id,
            // has nothing pending it cannot name.
            self.cancel(id);
            return Err(e);
        }
        Ok(id)
    }

    /// [`Timers::insert`] at `Instant::now() + after`.
    ///
    /// # Errors
    ///
    /// As [`Timers::insert`].
    pub fn insert_after(&mut self, after: Duration, token: u64) -> Result<TimerId> {
        self.insert(Instant::now() + after, token)
    }

    /// Moves a pending deadline. A later deadline costs no system call; an earlier one than
    /// the driving kevent's re-arms it. Returns `false` (and does nothing) for a stale id.
    ///
    /// # Errors
    ///
    /// [`Op::Add`](crate::Op::Add) when the re-arm failed; the deadline is moved anyway, and
    /// the next [`Timers::pop_expired`] arms for it.
    pub fn reset(&mut self, id: TimerId, deadline: Instant) -> Result<bool> {
        let Some(s) = self.slot_mut(id) else {
            return Ok(false);
        };
        let old = s.deadline.replace(deadline);
        if old.is_some_and(|old| deadline < old) {
            // The live heap entry is too late now: a new one supersedes it.
            self.push(id.slot, deadline);
            self.arm_for(deadline)?;
        }
        // Later: the live entry stays; when it comes up, it is pushed again at the new time.
        Ok(true)
    }

    /// Removes a pending deadline without a system call. Returns its token, or `None` for a
    /// stale id.
    pub fn cancel(&mut self, id: TimerId) -> Option<u64> {
        let s = self.slot_mut(id)?;
        s.deadline = None;
        let token = s.token;
        self.release(id.slot);
        Some(token)
    }

    /// The pending deadline of `id`.
    pub fn deadline(&self, id: TimerId) -> Option<Instant> {
        self.slots
            .get(id.slot as usize)
            .filter(|s| s.generation == id.generation)
            .and_then(|s| s.deadline)
    }

    /// The earliest pending deadline.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        self.settle_top();
        self.heap.peek().map(|Reverse((d, _, _))| *d)
    }

    /// Whether `event` is a driving kevent's: a TIMER event with this set's token (then
    /// nothing else needs to handle it; the deadlines it stands for come from
    /// [`Timers::pop_expired`]). Seeing the current driver's delivery spares the REMOVE a
    /// re-arm would otherwise send; an older driver's event (replaced while its event was
    /// in your buffer) is claimed too.
    pub fn handles(&mut self, event: &Event) -> bool {
        if event.token() != self.token || event.key().raw_type() != KEVENT_TIMER {
            return false;
        }
        let current = self
            .driver
            .as_ref()
            .is_some_and(|(reg, _)| reg.key() == event.key());
        if current && event.is_done() {
            if let Some((reg, _)) = self.driver.take() {
                reg.forget_delivered();
            }
        }
        true
    }

    /// The next deadline that has passed: its id (stale from now on) and token. When none is
    /// left, re-arms the driving kevent at the earliest pending deadline and returns `None`.
    ///
    /// # Errors
    ///
    /// [`Op::Add`](crate::Op::Add) from the re-arm; the deadlines are kept, and the next
    /// call retries.
    pub fn pop_expired(&mut self) -> Result<Option<(TimerId, u64)>> {
        self.settle_top();
        // The clock is read again only when nothing is due by its last reading: a burst of
        // expiries costs one reading.
        let top = self.heap.peek().map(|Reverse((d, _, _))| *d);
        if top.is_some_and(|d| d > self.now) {
            self.now = Instant::now();
        }
        let now = self.now;
        let due = self.heap.peek().filter(|Reverse((d, _, _))| *d <= now);
        if let Some(&Reverse((_, slot, _))) = due {
            self.heap.pop();
            let token = self.slots.get(slot as usize).map_or(0, |s| s.token);
            let generation = self.slots.get(slot as usize).map_or(0, |s| s.generation);
            self.release(slot);
            return Ok(Some((TimerId { slot, generation }, token)));
        }
        match self.heap.peek() {
            Some(&Reverse((d, _, _))) => {
                let armed_in_time = self
                    .driver
                    .as_ref()
                    .is_some_and(|(_, at)| *at > now && *at <= d + self.resolution);
                if !armed_in_time {
                    self.rearm(d)?;
                }
            }
            // Nothing pending: the driver may go.
            None => self.driver = None,
        }
        Ok(None)
    }

    /// Drops stale and postponed entries from the top of the heap until the top is a live
    /// entry at its slot's deadline.
    fn settle_top(&mut self) {
        while let Some(&Reverse((d, slot, entry))) = self.heap.peek() {
            let Some(s) = self.slots.get(slot as usize) else {
                self.heap.pop();
                continue;
            };
            match s.deadline {
                Some(deadline) if s.entry == entry => {
                    if deadline > d {
                        // Postponed by `reset`: queue it at its deadline.
                        self.heap.pop();
                        self.push(slot, deadline);
                        continue;
                    }
                    return;
                }
                // Cancelled, expired, or superseded by a newer entry.
                _ => {
                    self.heap.pop();
                }
            }
        }
    }

    /// Pushes the live entry of `slot` at `deadline`, and compacts the heap when stale
    /// entries outnumber live ones.
    fn push(&mut self, slot: u32, deadline: Instant) {
        let Some(s) = self.slots.get_mut(slot as usize) else {
            return;
        };
        s.entry = s.entry.wrapping_add(1);
        self.heap.push(Reverse((deadline, slot, s.entry)));
        if self.heap.len() > 2 * self.live + 1024 {
            let slots = &self.slots;
            self.heap.retain(|&Reverse((_, slot, entry))| {
                slots
                    .get(slot as usize)
                    .is_some_and(|s| s.deadline.is_some() && s.entry == entry)
            });
        }
    }

    fn slot_mut(&mut self, id: TimerId) -> Option<&mut Slot> {
        self.slots
            .get_mut(id.slot as usize)
            .filter(|s| s.generation == id.generation && s.deadline.is_some())
    }

    /// Frees `slot` (its id goes stale).
    fn release(&mut self, slot: u32) {
        if let Some(s) = self.slots.get_mut(slot as usize) {
            s.deadline = None;
            s.generation = s.generation.wrapping_add(1);
            self.free.push(slot);
            self.live -= 1;
        }
    }

    /// Makes sure the driver fires no later than `deadline`.
    fn arm_for(&mut self, deadline: Instant) -> Result<()> {
        match &self.driver {
            Some((_, at)) if *at <= deadline + self.resolution => Ok(()),
            _ => self.rearm(deadline),
        }
    }

    /// (Re-)arms the driving kevent at `deadline`: REMOVE of the old one (by dropping its
    /// registration), ADD of a ONESHOT TIMER whose interval is the time left. If the
    /// interval is taken by another timer of the queue, the next nanosecond is tried.
    fn rearm(&mut self, deadline: Instant) -> Result<()> {
        self.driver = None;
        let now = Instant::now();
        let exact = deadline.saturating_duration_since(now);
        // Rounded up to the resolution: deadlines close together share one wake-up.
        let mut after = match self.resolution.as_nanos() {
            0 => exact,
            r => Duration::from_nanos(
                u64::try_from(exact.as_nanos().div_ceil(r) * r).unwrap_or(u64::MAX),
            ),
        }
        .max(Duration::from_nanos(1));
        for _ in 0..EEXIST_TRIES {
            match self.queue.add(Timer::oneshot(after).token(self.token)) {
                Ok(reg) => {
                    self.driver = Some((reg, now + after));
                    return Ok(());
                }
                Err(e) if e.error().errno() == Some(Errno::EEXIST) => {
                    after += Duration::from_nanos(1);
                }
                Err(e) => return Err(e.into_error()),
            }
        }
        Err(crate::error::Error::os(
            crate::error::Op::Add,
            Errno::EEXIST,
        ))
    }

    /// The key of the driving kevent, while one is armed.
    pub fn driver_key(&self) -> Option<Key> {
        self.driver.as_ref().map(|(r, _)| r.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_name_nothing() {
        let q = Queue::new().unwrap();
        let mut t = Timers::new(&q, 1).unwrap();
        let far = Instant::now() + Duration::from_secs(3600);
        let a = t.insert(far, 10).unwrap();
        assert_eq!(t.cancel(a), Some(10));
        assert_eq!(t.cancel(a), None);
        let b = t.insert(far, 11).unwrap();
        assert_eq!(b.slot, a.slot, "the slot is reused");
        assert!(!t.reset(a, far).unwrap(), "the old id is stale");
        assert_eq!(t.deadline(b), Some(far));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn the_heap_stays_bounded_under_resets() {
        let q = Queue::new().unwrap();
        let mut t = Timers::new(&q, 1).unwrap();
        let base = Instant::now() + Duration::from_secs(3600);
        let ids: Vec<_> = (0..100u64)
            .map(|i| t.insert(base + Duration::from_secs(i), i).unwrap())
            .collect();
        for round in 0..100u32 {
            for (i, &id) in ids.iter().enumerate() {
                // Alternately earlier and later: every earlier one pushes an entry.
                let d = base - Duration::from_millis(u64::from(round % 7))
                    + Duration::from_secs(i as u64);
                assert!(t.reset(id, d).unwrap());
            }
        }
        assert!(t.heap.len() <= 2 * t.live + 1024 + 1, "{}", t.heap.len());
        assert_eq!(t.len(), 100);
    }
}
