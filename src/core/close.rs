//! [`Close`]: why the pump closed, and whom else to tell.
//!
//! That it closed is a bit of [`Rounds`](super::Rounds); the close path itself is
//! [`Core::close`](super::Core::close).

use std::collections::HashMap;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Weak;

use event_listener::{Event, EventListener};

use crate::sync::{lock, AtomicBool, AtomicUsize, Mutex};
use crate::Error;

/// Something besides the pump's own waits to tell when the pump closes: a completion table,
/// which wakes the waits pending in it.
pub(crate) trait CloseHook: Send + Sync {
    fn closed(&self);
}

/// The close reason, the hooks, and whether the loop is gone.
pub(crate) struct Close {
    /// Why the pump stopped, if not because it was closed ([`Error::Closed`]): a panic in
    /// `run_once`, a failed trigger. Set before the pump is marked closed, so whoever sees it
    /// closed sees the reason. A panic replaces an earlier reason (a run in progress when the
    /// pump was closed may still panic, and that is what its waits should hear); nothing
    /// replaces a panic.
    reason: Mutex<Option<Error>>,
    /// Told when the pump closes, each once: the tables some wait of this pump is pending in.
    /// Kept by the pump, so a table needs no list of the pumps it serves; weak, so a table
    /// that is gone is not kept alive (and is pruned when the next one is added).
    hooks: Mutex<Hooks>,
    /// 1 once the loop (its closure, or its state on the pump thread) has been dropped and no
    /// run is in progress: what [`Pump::closed`](crate::Pump::closed) waits for. Set once, after
    /// the pump closed; `SeqCst` against the listen-then-look of `gone`'s listeners.
    loop_gone: AtomicUsize,
    gone: Event,
    /// A `Drop` of the user's panicked after the close (the loop's, its state's): reported in
    /// [`Stats::panicked`](crate::Stats::panicked), not as the close's reason.
    drop_panicked: AtomicBool,
}

impl Default for Close {
    fn default() -> Self {
        Close {
            reason: Mutex::new(None),
            hooks: Mutex::new(Hooks::default()),
            loop_gone: AtomicUsize::new(0),
            gone: Event::new(),
            drop_panicked: AtomicBool::new(false),
        }
    }
}

#[derive(Default)]
struct Hooks {
    /// By address: a `Weak` keeps its allocation, so a live entry's address is not reused.
    list: HashMap<usize, Weak<dyn CloseHook>>,
    /// How many entries the last sweep of dropped hooks left: the next one comes at twice that,
    /// so each hook added costs O(1) however many are live (one per request and subscription).
    swept: usize,
    /// Set by the close: a hook added later is told at once.
    told: bool,
}

impl Close {
    /// Why a closed pump is closed.
    pub(crate) fn reason(&self) -> Error {
        lock(&self.reason).clone().unwrap_or(Error::Closed)
    }

    /// A `Drop` of the user's panicked once the pump had closed.
    pub(crate) fn note_drop_panic(&self) {
        self.drop_panicked.store(true, SeqCst);
    }

    /// Whether a `Drop` of the user's panicked once the pump had closed.
    pub(crate) fn drop_panicked(&self) -> bool {
        self.drop_panicked.load(SeqCst)
    }

    /// Records why the pump is about to close.
    pub(crate) fn set_reason(&self, why: Error) {
        let mut reason = lock(&self.reason);
        if *reason != Some(Error::Panicked) && (reason.is_none() || why == Error::Panicked) {
            *reason = Some(why);
        }
    }

    /// Tells `hook` when the pump closes, once, however often it is heard: at once if the pump
    /// has closed already.
    pub(crate) fn hear(&self, hook: Weak<dyn CloseHook>) {
        let mut hooks = lock(&self.hooks);
        if hooks.told {
            drop(hooks);
            if let Some(hook) = hook.upgrade() {
                hook.closed();
            }
            return;
        }
        let address = Weak::as_ptr(&hook).cast::<()>() as usize;
        if hooks.list.contains_key(&address) {
            return;
        }
        if hooks.list.len() >= 2 * hooks.swept.max(16) {
            hooks.list.retain(|_, known| known.strong_count() > 0);
            hooks.swept = hooks.list.len();
        }
        hooks.list.insert(address, hook);
    }

    /// The loop was dropped after the close: wakes [`Pump::closed`](crate::Pump::closed).
    pub(crate) fn set_loop_gone(&self) {
        self.loop_gone.store(1, SeqCst);
        self.gone.notify(usize::MAX);
    }

    pub(crate) fn is_loop_gone(&self) -> bool {
        self.loop_gone.load(SeqCst) == 1
    }

    /// Listen, then look at [`is_loop_gone`](Close::is_loop_gone).
    pub(crate) fn listen_gone(&self) -> EventListener {
        self.gone.listen()
    }

    /// Tells every hook, once: the close path calls this after marking the pump closed.
    pub(crate) fn tell_hooks(&self) {
        let list = {
            let mut hooks = lock(&self.hooks);
            hooks.told = true;
            std::mem::take(&mut hooks.list)
        };
        for hook in list.values().filter_map(Weak::upgrade) {
            hook.closed();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::{Close, CloseHook};
    use crate::Error;

    #[derive(Default)]
    struct Counted(AtomicUsize);

    impl CloseHook for Counted {
        fn closed(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn each_hook_is_told_once() {
        let close = Close::default();
        let table = Arc::new(Counted::default());
        let hook: Arc<dyn CloseHook> = table.clone();
        close.hear(Arc::downgrade(&hook));
        close.hear(Arc::downgrade(&hook));
        close.tell_hooks();
        assert_eq!(table.0.load(Ordering::SeqCst), 1);
        close.hear(Arc::downgrade(&hook));
        assert_eq!(
            table.0.load(Ordering::SeqCst),
            2,
            "a hook heard after the close is told"
        );
    }

    #[test]
    fn a_panic_is_the_reason_that_stays() {
        let close = Close::default();
        assert_eq!(close.reason(), Error::Closed);
        close.set_reason(Error::Trigger(std::io::ErrorKind::NotFound));
        close.set_reason(Error::Panicked);
        close.set_reason(Error::Trigger(std::io::ErrorKind::Other));
        assert_eq!(close.reason(), Error::Panicked);
    }
}
