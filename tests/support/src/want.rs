//! Exact expectations: [`Want`], the multiset matcher and [`expect_events`].

use crate::*;

/// One expected event: type and id always; the rest only when set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want {
    /// `type`.
    pub type_: u32,
    /// `id.raw_u64`.
    pub id: u64,
    /// Exact `ret_flags`; when `None`, BROKEN and COPY_FAILED must be clear (DONE may be set:
    /// the spec leaves it open for ordinary deliveries).
    pub ret_flags: Option<u32>,
    /// Exact `ret_data[0]`.
    pub data0: Option<u32>,
    /// Exact `ret_data[1]`.
    pub data1: Option<u32>,
    /// Exact cookie.
    pub cookie: Option<u64>,
    /// Exact `event`.
    pub event: Option<u32>,
    /// `ret_flags` bits that must be set (when `ret_flags` is `None`).
    pub must: u32,
}

impl Want {
    /// An event of `type_` for `id`.
    pub const fn new(type_: u32, id: u64) -> Want {
        Want {
            type_,
            id,
            ret_flags: None,
            data0: None,
            data1: None,
            cookie: None,
            event: None,
            must: 0,
        }
    }

    /// `ret_flags` must include `f` (other bits as by default).
    pub const fn with(mut self, f: u32) -> Want {
        self.must |= f;
        self
    }

    /// The event an expected `ukevent` is about (type and id).
    pub fn of(e: &ukevent) -> Want {
        Want::new(e.type_, e.id.as_u64())
    }

    /// Exact `ret_flags`.
    pub const fn flags(mut self, f: u32) -> Want {
        self.ret_flags = Some(f);
        self
    }

    /// Exact `ret_data[0]`.
    pub const fn data0(mut self, v: u32) -> Want {
        self.data0 = Some(v);
        self
    }

    /// Exact `ret_data[1]`.
    pub const fn data1(mut self, v: u32) -> Want {
        self.data1 = Some(v);
        self
    }

    /// Exact cookie.
    pub const fn cookie(mut self, c: u64) -> Want {
        self.cookie = Some(c);
        self
    }

    /// Exact `event`.
    pub const fn event(mut self, e: u32) -> Want {
        self.event = Some(e);
        self
    }

    /// A failure: `RET_BROKEN|RET_DONE` with `ret_data[1] = -e`.
    pub const fn broken(mut self, e: Errno) -> Want {
        self.ret_flags = Some(KEVENT_RET_BROKEN | KEVENT_RET_DONE);
        self.data1 = Some(e.negated());
        self
    }

    /// Whether `e` is this event.
    pub fn matches(&self, e: &ukevent) -> bool {
        e.type_ == self.type_
            && e.id.as_u64() == self.id
            && match self.ret_flags {
                Some(f) => e.ret_flags == f,
                None => {
                    e.ret_flags & self.must == self.must
                        && e.ret_flags & (KEVENT_RET_BROKEN | KEVENT_RET_COPY_FAILED) & !self.must
                            == 0
                }
            }
            && self.data0.is_none_or(|v| e.ret_data[0] == v)
            && self.data1.is_none_or(|v| e.ret_data[1] == v)
            && self.cookie.is_none_or(|c| e.cookie() == c)
            && self.event.is_none_or(|v| e.event == v)
    }
}

/// The one matcher: pairs every expectation with a distinct got item it accepts (a maximum
/// bipartite matching, so the order of either list does not matter). Returns the
/// expectations left without an item and the items left without an expectation, by index:
/// both empty means `got` is exactly `want` as a multiset.
///
/// ```
/// let (missing, extra) = kevent_test_support::match_exact_by(&[3, 1], &[1, 2], |w, g| w == g);
/// assert_eq!((missing, extra), (vec![1], vec![0]));
/// ```
pub fn match_exact_by<G, W>(
    got: &[G],
    want: &[W],
    accepts: impl Fn(&W, &G) -> bool,
) -> (Vec<usize>, Vec<usize>) {
    fn augment<G, W>(
        w: usize,
        got: &[G],
        want: &[W],
        accepts: &impl Fn(&W, &G) -> bool,
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for g in 0..got.len() {
            if !seen[g] && accepts(&want[w], &got[g]) {
                seen[g] = true;
                if owner[g].is_none_or(|o| augment(o, got, want, accepts, seen, owner)) {
                    owner[g] = Some(w);
                    return true;
                }
            }
        }
        false
    }
    let mut owner = vec![None; got.len()];
    let mut missing = Vec::new();
    for w in 0..want.len() {
        let mut seen = vec![false; got.len()];
        if !augment(w, got, want, &accepts, &mut seen, &mut owner) {
            missing.push(w);
        }
    }
    let extra = (0..got.len()).filter(|&g| owner[g].is_none()).collect();
    (missing, extra)
}

/// Matches `got` against `want` exactly (as multisets, [`match_exact_by`] with
/// [`Want::matches`]); the error describes the difference.
pub fn match_exact(got: &[ukevent], want: &[Want]) -> Result<(), String> {
    let (missing, extra) = match_exact_by(got, want, Want::matches);
    if missing.is_empty() && extra.is_empty() {
        return Ok(());
    }
    let missing: Vec<&Want> = missing.iter().map(|&w| &want[w]).collect();
    let extra: Vec<&ukevent> = extra.iter().map(|&g| &got[g]).collect();
    Err(format!(
        "events differ\n  missing:    {missing:?}\n  unexpected: {extra:#?}\n  got:        {got:#?}"
    ))
}

/// Asserts that `got` holds exactly the `want`ed events: none missing, none unexpected,
/// none twice.
#[track_caller]
pub fn expect_events(got: &[ukevent], want: &[Want]) {
    if let Err(e) = match_exact(got, want) {
        panic!("{e}");
    }
}
