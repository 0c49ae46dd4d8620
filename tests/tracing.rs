//! The `tracing` feature: a span per pump, an event per round, events for late and skipped ticks
//! and for the close, with its reason.
#![cfg(feature = "tracing")]

mod common;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::{assert_clean, eventually, Rt};
use fake_loop::FakeLoop;
use ffi_pump::{Error, Pump};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// What an event said: its level and fields (the message under `message`).
#[derive(Debug, Clone)]
struct Seen {
    level: Level,
    fields: HashMap<String, String>,
}

impl Seen {
    fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }

    fn number(&self, field: &str) -> u64 {
        self.fields
            .get(field)
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("event {self:?} has no number `{field}`"))
    }
}

#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

/// A subscriber that keeps every span's fields and, by the name of the pump whose span is their
/// parent, every event.
#[derive(Default)]
struct Recorder {
    next_id: AtomicU64,
    spans: Mutex<HashMap<u64, HashMap<String, String>>>,
    events: Mutex<HashMap<String, Vec<Seen>>>,
}

impl Subscriber for Recorder {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("ffi_pump")
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = Fields::default();
        span.record(&mut fields);
        self.spans.lock().unwrap().insert(id, fields.0);
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(known) = self.spans.lock().unwrap().get_mut(&span.into_u64()) {
            known.extend(fields.0);
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let pump = event
            .parent()
            .and_then(|id| self.spans.lock().unwrap().get(&id.into_u64()).cloned())
            .and_then(|span| span.get("name").cloned())
            .unwrap_or_default();
        let seen = Seen {
            level: *event.metadata().level(),
            fields: fields.0,
        };
        self.events
            .lock()
            .unwrap()
            .entry(pump)
            .or_default()
            .push(seen);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// The process's subscriber: pumps run on threads of their own, so a thread-local default would
/// miss their events.
fn recorder() -> &'static Recorder {
    static RECORDER: OnceLock<Arc<Recorder>> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = Arc::new(Recorder::default());
        tracing::subscriber::set_global_default(recorder.clone()).expect("first subscriber");
        recorder
    })
}

/// The events of the pump named `name`, so far.
fn events_of(name: &str) -> Vec<Seen> {
    recorder()
        .events
        .lock()
        .unwrap()
        .get(name)
        .cloned()
        .unwrap_or_default()
}

/// The fields of the span of the pump named `name`.
fn span_of(name: &str) -> HashMap<String, String> {
    recorder()
        .spans
        .lock()
        .unwrap()
        .values()
        .find(|fields| fields.get("name").map(String::as_str) == Some(name))
        .cloned()
        .unwrap_or_else(|| panic!("no span for the pump {name}"))
}

fn with_message<'a>(events: &'a [Seen], message: &str) -> Vec<&'a Seen> {
    events.iter().filter(|e| e.message() == message).collect()
}

on_every_backend! {
    fn every_round_and_the_close_are_traced(rt: Rt) {
        const IDS: u32 = 50;
        recorder();
        let name = format!("rounds-{rt:?}");
        let fx = Arc::new(FakeLoop::new(IDS));
        rt.block_on(async {
            // Every wait is woken by a round's pass, and counted in its event: none is due at its
            // first check (armed once all wait), and no pass is cut short by its budget (checks
            // it leaves wake theirs after the event). A loaded machine did both before.
            let builder = Pump::builder().name(&name).check_budget(Duration::from_secs(10));
            let pump = rt.pump(builder, &fx);
            let tasks: Vec<_> = (0..IDS)
                .map(|id| {
                    let (pump, fx) = (pump.clone(), fx.clone());
                    rt.spawn(async move {
                        pump.wait_until(move || fx.check(id)).timeout(Duration::from_secs(10)).await
                    })
                })
                .collect();
            common::pending(&pump, IDS as usize).await;
            for id in 0..IDS {
                fx.arm_in(id, Duration::from_millis(10 + u64::from(id % 20)));
            }
            for task in tasks {
                task.await.expect("every wait completes");
            }
            // A kick always makes a run of its own (a kick during a run makes one more).
            pump.kick();
            let seen = name.clone();
            eventually("a round for the kick", || {
                with_message(&events_of(&seen), "round").iter().any(|e| e.fields["cause"] == "kick")
            })
            .await;
            assert!(pump.close());
            let rounds = pump.stats().rounds;
            eventually("a round event per round", || {
                with_message(&events_of(&name), "round").len() as u64 == rounds
            })
            .await;
            assert_clean(&fx);
        });

        let span = span_of(&name);
        assert_eq!(span.get("backend").map(String::as_str), Some(rt_label(rt)), "span {span:?}");
        let events = events_of(&name);
        let rounds = with_message(&events, "round");
        assert!(rounds.iter().all(|e| e.level == Level::TRACE));
        // Sorted: a round's event is sent after its lock is let go, so the next round's may come first.
        let mut numbers: Vec<u64> = rounds.iter().map(|e| e.number("round")).collect();
        numbers.sort_unstable();
        let expected: Vec<u64> = (1..=numbers.len() as u64).collect();
        assert_eq!(numbers, expected, "one event per round");
        let causes: Vec<&str> = rounds.iter().map(|e| e.fields["cause"].as_str()).collect();
        assert!(causes.contains(&"tick"), "causes {causes:?}");
        assert!(
            causes.iter().all(|c| ["tick", "kick", "turn"].contains(c)),
            "causes {causes:?}"
        );
        for round in &rounds {
            round.number("run_us");
            round.number("checks_us");
        }
        let woken: u64 = rounds.iter().map(|e| e.number("woken")).sum();
        assert!(woken >= u64::from(IDS), "{woken} waits woken for {IDS} waits");
        let closes = with_message(&events, "closed");
        assert_eq!(closes.len(), 1, "events {events:?}");
        assert_eq!(closes[0].level, Level::DEBUG);
        assert_eq!(closes[0].fields["reason"], Error::Closed.to_string());
    }

    fn a_turn_is_traced_as_its_cause(rt: Rt) {
        recorder();
        let name = format!("turn-{rt:?}");
        rt.block_on(async {
            // No ticks: the turn's run is its own (on a pump thread, the kick it sends).
            let builder = Pump::builder().name(&name).interval(Duration::from_secs(3600));
            let pump = rt.pump_with(builder, || {});
            pump.turn().await.expect("turn");
            let seen = name.clone();
            eventually("the turn's round", || !with_message(&events_of(&seen), "round").is_empty()).await;
            pump.close();
        });
        let events = events_of(&name);
        let rounds = with_message(&events, "round");
        let asked = if rt == Rt::LoopThread { "kick" } else { "turn" };
        assert_eq!(rounds.len(), 1, "events {events:?}");
        assert_eq!(rounds[0].fields["cause"], asked);
    }

    fn a_panic_in_run_once_is_traced_as_an_error(rt: Rt) {
        recorder();
        let name = format!("panic-{rt:?}");
        let calls = Arc::new(AtomicU64::new(0));
        rt.block_on(async {
            let counter = calls.clone();
            let pump = rt.pump_with(Pump::builder().name(&name), move || {
                if counter.fetch_add(1, Ordering::SeqCst) == 1 {
                    panic!("the C loop failed (on purpose)");
                }
            });
            let outcome = pump.wait_until(|| false).timeout(Duration::from_secs(10)).await;
            assert_eq!(outcome, Err(Error::Panicked));
        });
        let events = events_of(&name);
        let closes = with_message(&events, "closed");
        assert_eq!(closes.len(), 1, "events {events:?}");
        assert_eq!(closes[0].level, Level::ERROR);
        assert_eq!(closes[0].fields["reason"], Error::Panicked.to_string());
    }

    fn late_and_skipped_ticks_are_traced(rt: Rt) {
        recorder();
        let name = format!("ticks-{rt:?}");
        rt.block_on(async {
            // A 3 ms run on a 1 ms timer: the tick after each run is late.
            let pump = rt.pump_with(Pump::builder().name(&name), || {
                std::thread::sleep(Duration::from_millis(3));
            });
            let waiting = rt.spawn({
                let pump = pump.clone();
                async move { pump.wait_until(|| false).timeout(Duration::from_millis(100)).await }
            });
            if rt != Rt::LoopThread {
                // Turns run the loop in this task; the timer's ticks meanwhile find them running.
                for _ in 0..10 {
                    pump.turn().await.expect("turn");
                }
            }
            assert_eq!(waiting.await, Err(Error::TimedOut));
            let probe = pump.clone();
            eventually("an event per late or skipped tick", || {
                let stats = probe.stats();
                let events = events_of(&name);
                with_message(&events, "late tick").len() as u64 == stats.late_ticks
                    && with_message(&events, "skipped tick").len() as u64 == stats.skipped_ticks
            })
            .await;
            pump.close();
            let stats = pump.stats();
            assert!(stats.late_ticks > 0, "no late tick in 100 ms of 3 ms runs: {stats:?}");
            let events = events_of(&name);
            for late in with_message(&events, "late tick") {
                assert_eq!(late.level, Level::DEBUG);
                assert!(late.number("late_us") > 0, "{late:?}");
            }
        });
    }
}

#[cfg(unix)]
on_every_backend! {
    fn a_failed_trigger_is_traced_as_a_warning(rt: Rt) {
        recorder();
        let name = format!("trigger-{rt:?}");
        let outcome = rt.block_on(common::wait_while_the_library_closes_its_descriptor(
            rt,
            |builder| builder.name(&name),
            || {},
        ));
        assert!(matches!(outcome, Err(Error::Trigger(_))), "got {outcome:?}");
        let events = events_of(&name);
        let closes = with_message(&events, "closed");
        assert_eq!(closes.len(), 1, "events {events:?}");
        assert_eq!(closes[0].level, Level::WARN);
        assert!(closes[0].fields["reason"].contains("trigger"), "{:?}", closes[0]);
    }
}

fn rt_label(rt: Rt) -> &'static str {
    match rt {
        Rt::Smol => "smol",
        Rt::AsyncStd => "async-std",
        Rt::Tokio => "tokio",
        Rt::Thread => "thread",
        Rt::LoopThread => "loop-thread",
    }
}
