//! Process CPU time and peak memory, from `getrusage`, and the time the host took this machine's
//! CPUs away, from `/proc/stat`.

use std::time::Duration;

/// CPU time and peak RSS of this process so far, and the machine's steal time.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// User plus system CPU time.
    pub cpu: Duration,
    /// Peak resident set size, in KiB.
    pub max_rss_kib: u64,
    /// Steal time of all CPUs since boot, if the kernel reports it.
    pub steal: Option<Duration>,
    /// Page faults served without I/O (a page touched for the first time, zeroed).
    pub minor_faults: u64,
    /// Context switches, voluntary (a thread parked) and not.
    pub context_switches: u64,
}

/// Reads this process's usage.
pub fn now() -> Usage {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF is a valid `who`, and `usage` is a valid, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage failed");
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    Usage {
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        max_rss_kib: usage.ru_maxrss as u64,
        steal: steal(),
        minor_faults: usage.ru_minflt as u64,
        context_switches: (usage.ru_nvcsw + usage.ru_nivcsw) as u64,
    }
}

/// The 8th number of `/proc/stat`'s `cpu` line: time a virtual machine's CPUs were runnable but
/// the host ran something else. A thread running then stalls for all of it, which no design in
/// the guest can hide, so a latency tail measured across steal says more about the host than
/// about the approach.
///
/// The kernel reports it in clock ticks (10 ms at the usual 100 Hz), so a difference of zero means
/// less than a tick, not none.
fn steal() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: u64 = stat
        .lines()
        .next()?
        .split_whitespace()
        .nth(8)?
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let per_second = u64::try_from(per_second).ok().filter(|&hz| hz > 0)?;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / per_second))
}

/// CPU time of each of this process's threads so far, in ns, by thread name, summed over the
/// threads of one name (`/proc/self/task/*/schedstat`; empty where that does not exist).
pub fn by_thread() -> std::collections::BTreeMap<String, u64> {
    let mut cpu = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return cpu;
    };
    for task in tasks.flatten() {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|stat| stat.split_whitespace().next()?.parse::<u64>().ok());
        if let Some(ns) = ns {
            *cpu.entry(name.trim().to_string()).or_default() += ns;
        }
    }
    cpu
}
