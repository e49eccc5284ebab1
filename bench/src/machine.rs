//! The machine a run measured: CPU model and count, kernel, memory, limits, date, and the
//! kevent backends available, for the report's header and the JSON.

use std::time::{SystemTime, UNIX_EPOCH};

use kevent_backend::Backend;

use crate::json::Json;
use crate::os;

/// What the report says about the machine.
#[derive(Clone, Debug)]
pub struct Machine {
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Processors listed in `/proc/cpuinfo`.
    pub cpuinfo_processors: usize,
    /// CPUs this process may run on (what `nproc` prints).
    pub nproc: usize,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// `MemTotal` in MiB.
    pub mem_mib: u64,
    /// The fd limit (soft, after raising it to the hard one) and the hard limit.
    pub fd_limit: (u64, u64),
    /// `net.core.somaxconn` (caps the HTTP servers' listen backlog).
    pub somaxconn: String,
    /// UTC date and time of the run, `YYYY-MM-DD HH:MM UTC`.
    pub date: String,
    /// The kevent backends measured, and why native is missing if it is.
    pub backends: Vec<Backend>,
    /// Why the native backend is not measured (`None` when it is).
    pub native_unavailable: Option<String>,
    /// What the clocks count.
    pub clock: Clock,
}

/// What the machine's clocks count (`KEVENT_BENCH_CLOCK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Time (a CPU or an emulator that runs as fast as it can).
    Time,
    /// Executed instructions: `scripts/vm-lane --icount` boots its guest with QEMU's
    /// `-icount shift=0`, one guest nanosecond per instruction
    /// (`KEVENT_BENCH_CLOCK=instructions`).
    Instructions,
}

/// The caveat every instruction-time report carries.
pub const INSTRUCTION_TIME_CAVEAT: &str = "**Instruction-time**: the guest's clock counts \
    executed instructions (QEMU `-icount shift=0`: 1 ns = 1 instruction, 1 µs = 1000 \
    instructions), so the host's load does not change the figures. Instructions are not \
    cycles: cache misses, the real cost of a syscall entry, `STAC`/`CLAC` and speculation \
    mitigations are not weighted; only ratios between mechanisms of the same run mean much.";

impl Clock {
    /// The clock named by `KEVENT_BENCH_CLOCK` (`instructions`; anything else is time).
    pub fn from_env() -> Clock {
        match std::env::var("KEVENT_BENCH_CLOCK").as_deref() {
            Ok("instructions") => Clock::Instructions,
            _ => Clock::Time,
        }
    }

    /// `"instruction-time"` or `"time"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Clock::Time => "time",
            Clock::Instructions => "instruction-time",
        }
    }

    /// "µs" qualified by the clock: `µs` or `µs of instruction-time`.
    pub fn us(self) -> &'static str {
        match self {
            Clock::Time => "µs",
            Clock::Instructions => "µs of instruction-time",
        }
    }
}

impl Machine {
    /// Reads everything now (and raises the fd limit as a side effect).
    pub fn probe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".to_owned(), |(_, v)| v.trim().to_owned());
        let cpuinfo_processors = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kib: u64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "?".to_owned())
        };
        let mut backends = vec![Backend::fallback()];
        let native_unavailable = match Backend::native() {
            Ok(n) => {
                backends.push(n);
                None
            }
            Err(e) => Some(e.reason().to_string()),
        };
        Machine {
            cpu_model,
            cpuinfo_processors,
            nproc: os::allowed_cpus().len(),
            kernel: read("/proc/sys/kernel/osrelease"),
            mem_mib: mem_kib / 1024,
            fd_limit: os::raise_fd_limit(),
            somaxconn: read("/proc/sys/net/core/somaxconn"),
            date: utc_now(),
            backends,
            native_unavailable,
            clock: Clock::from_env(),
        }
    }

    /// The Markdown header lines.
    pub fn markdown(&self) -> String {
        let names: Vec<&str> = self.backends.iter().map(|b| b.as_str()).collect();
        let mut s = format!(
            "* Machine: {} × {} (cpuinfo), `nproc` {}, {} MiB RAM, Linux {}\n\
             * Date: {}\n\
             * fd limit: {} (hard {}); `net.core.somaxconn` {}\n\
             * kevent backends measured: {}\n",
            self.cpuinfo_processors,
            self.cpu_model,
            self.nproc,
            self.mem_mib,
            self.kernel,
            self.date,
            self.fd_limit.0,
            self.fd_limit.1,
            self.somaxconn,
            names.join(", "),
        );
        if let Some(why) = &self.native_unavailable {
            s.push_str(&format!("  (native not measured: {why})\n"));
        }
        if self.clock == Clock::Instructions {
            s.push_str(&format!("* Clock: {INSTRUCTION_TIME_CAVEAT}\n"));
        }
        s
    }

    /// The JSON object.
    pub fn json(&self) -> Json {
        Json::obj([
            ("cpu_model", Json::from(self.cpu_model.as_str())),
            ("cpuinfo_processors", Json::from(self.cpuinfo_processors)),
            ("nproc", Json::from(self.nproc)),
            ("kernel", Json::from(self.kernel.as_str())),
            ("mem_mib", Json::from(self.mem_mib)),
            ("fd_limit_soft", Json::from(self.fd_limit.0)),
            ("fd_limit_hard", Json::from(self.fd_limit.1)),
            ("somaxconn", Json::from(self.somaxconn.as_str())),
            ("date", Json::from(self.date.as_str())),
            (
                "backends",
                Json::arr(self.backends.iter().map(|b| Json::from(b.as_str()))),
            ),
            (
                "native_unavailable",
                Json::from(self.native_unavailable.clone()),
            ),
            ("clock", Json::from(self.clock.as_str())),
        ])
    }
}

/// The 1-minute load average (`/proc/loadavg`), to show how busy the machine was.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The current UTC time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM UTC` (civil-from-days, proleptic Gregorian).
fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_796_083_200 + 3_660), "2026-12-01 01:01 UTC");
    }

    /// P35: a report made on the instruction clock says so and carries the caveat; one made
    /// on time does not.
    #[test]
    fn p35_instruction_time_reports_say_so() {
        let mut m = Machine::probe();
        m.clock = Clock::Time;
        assert!(!m.markdown().contains("nstruction-time"));
        m.clock = Clock::Instructions;
        let md = m.markdown();
        assert!(md.contains("**Instruction-time**"), "{md}");
        assert!(md.contains("not weighted"), "{md}");
        assert_eq!(Clock::Instructions.us(), "µs of instruction-time");
    }

    #[test]
    fn probe_finds_the_fallback() {
        let m = Machine::probe();
        assert!(m.nproc >= 1);
        assert_eq!(m.backends[0], Backend::fallback());
        assert!(m.markdown().contains("kevent backends measured: fallback"));
    }
}
