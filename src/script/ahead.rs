//! The first Lua state of a process, made ahead: on another CPU while the command line is
//! read and the host opened, with the first run done on that same thread.
//!
//! Making a state (libraries, host API, prelude) needs neither the command line nor the host,
//! so it is made while they are: `start` begins it at once. The run that follows goes to the
//! thread that made the state, rather than the state to the run's thread: no thread is started
//! for the run and the state changes no hands. The first `spawn` (in `vm.rs`) runs there while
//! the thread waits; the first `Vm::new` elsewhere takes the state; every later one (and any
//! when none was made) makes its own. The thread is sent to another CPU (`cpu`), since Linux
//! would otherwise start it on the starting thread's and make nothing ahead; and it spins
//! briefly for its run, since waking a sleeping thread costs a good part of what it saves
//! (`Ahead::serve`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::prelude::Fresh;

/// A run handed to the thread that made the state: it gets the state, or `None` when making
/// it failed (the run then makes its own and reports what went wrong).
pub(super) type Job = Box<dyn FnOnce(Option<Fresh>) + Send>;

enum Slot {
    Empty,
    Making,
    Ready(Fresh),
}

struct Inner {
    slot: Slot,
    /// A run waiting for the state, on the thread that makes it.
    job: Option<Job>,
    /// Whether the thread that makes the state still takes a run after it.
    serving: bool,
}

/// A slot for one state, the run it is for, and the signal that either changed (one per
/// process: [`SLOT`]).
pub(super) struct Ahead {
    inner: Mutex<Inner>,
    changed: Condvar,
    /// Set with every run handed over and every state taken: what a thread spinning for
    /// a run watches (see [`Ahead::serve`]).
    poked: AtomicBool,
}

pub(super) static SLOT: Ahead = Ahead::new();

impl Ahead {
    pub(super) const fn new() -> Ahead {
        Ahead {
            inner: Mutex::new(Inner {
                slot: Slot::Empty,
                job: None,
                serving: false,
            }),
            changed: Condvar::new(),
            poked: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, slot: Slot) {
        self.lock().slot = slot;
        self.changed.notify_all();
    }

    /// Says a state is on its way (and, with `serving`, that its thread takes a run after).
    pub(super) fn expect(&self, serving: bool) {
        let mut inner = self.lock();
        inner.slot = Slot::Making;
        inner.serving = serving;
    }

    pub(super) fn make(&self, make: impl FnOnce() -> mlua::Result<Fresh>) {
        // a failure or a panic empties the slot, so that no one waits for it for ever
        struct Unblock<'a>(&'a Ahead);
        impl Drop for Unblock<'_> {
            fn drop(&mut self) {
                let mut inner = self.0.lock();
                if matches!(inner.slot, Slot::Making) {
                    inner.slot = Slot::Empty;
                }
                drop(inner);
                self.0.changed.notify_all();
            }
        }
        let _unblock = Unblock(self);
        if let Ok(fresh) = make() {
            self.set(Slot::Ready(fresh));
        }
    }

    /// Makes the state, then runs the run handed over meanwhile or later with it; returns
    /// once the state was taken elsewhere instead, or making it failed with no run waiting.
    /// For up to `spin` it watches for the run on its CPU rather than sleep: waking a
    /// sleeping thread on another CPU took 40 to 280 us here, a good part of a one-line
    /// `lmcp run` (give `ZERO` when this thread shares its CPU with the one it waits for).
    pub(super) fn serve(&self, make: impl FnOnce() -> mlua::Result<Fresh>, spin: Duration) {
        struct Done<'a>(&'a Ahead);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                // no run handed over from now on runs here (nor waits for this thread)
                self.0.lock().serving = false;
            }
        }
        let _done = Done(self);
        self.make(make);
        let until = Instant::now() + spin;
        while !self.poked.load(Ordering::Acquire) && Instant::now() < until {
            std::hint::spin_loop();
        }
        let mut inner = self.lock();
        loop {
            if let Some(job) = inner.job.take() {
                let fresh = match std::mem::replace(&mut inner.slot, Slot::Empty) {
                    Slot::Ready(fresh) => Some(fresh),
                    _ => None,
                };
                inner.serving = false;
                drop(inner);
                job(fresh);
                return;
            }
            if !matches!(inner.slot, Slot::Ready(_)) {
                return;
            }
            inner = self.changed.wait(inner).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Hands a run to the thread that makes (or made) the state; the run back when that
    /// thread takes none any more.
    pub(super) fn submit(&self, job: Job) -> Result<(), Job> {
        let mut inner = self.lock();
        if inner.serving
            && inner.job.is_none()
            && matches!(inner.slot, Slot::Making | Slot::Ready(_))
        {
            inner.job = Some(job);
            drop(inner);
            self.poked.store(true, Ordering::Release);
            self.changed.notify_all();
            Ok(())
        } else {
            Err(job)
        }
    }

    pub(super) fn take(&self) -> Option<Fresh> {
        let mut inner = self.lock();
        while matches!(inner.slot, Slot::Making) {
            inner = self.changed.wait(inner).unwrap_or_else(|p| p.into_inner());
        }
        let taken = match std::mem::replace(&mut inner.slot, Slot::Empty) {
            Slot::Ready(fresh) => Some(fresh),
            _ => None,
        };
        drop(inner);
        // the thread that made it stops waiting for a run
        self.poked.store(true, Ordering::Release);
        self.changed.notify_all();
        taken
    }
}

/// Makes the first state on a thread of its own, which then does the first run handed to
/// it with [`submit`]. A process that never runs Lua never waits for it (the thread ends
/// with the process).
pub fn start() {
    SLOT.expect(true);
    let cpus = cpu::Elsewhere::here();
    let spawned = std::thread::Builder::new()
        .name("lua-ahead".into())
        .spawn(move || {
            cpus.leave();
            SLOT.serve(
                || {
                    let made = Fresh::make();
                    // the run may go where the scheduler likes
                    cpus.release();
                    made
                },
                cpus.spin(),
            )
        });
    match spawned {
        Ok(thread) => cpus.send(&thread),
        Err(_) => {
            // no thread to make it on: the run makes its own
            SLOT.expect(false);
            SLOT.set(Slot::Empty);
        }
    }
}

/// Another CPU for the thread that makes the state. Linux starts a new thread on the CPU
/// of the thread that made it, where it waits for that one to block: measured, the state
/// began to be made only once the host was open and the run asked for it, so nothing was
/// made ahead at all. Sent to another CPU (when the process may use one), it is made
/// while this thread reads the command line and opens the host; once made, the thread may
/// run anywhere again.
mod cpu {
    /// The longest a thread with a CPU of its own spins for its run, once per process: the
    /// run was handed over 0.05 to 0.3 ms after the state was made (a one-line `lmcp run`).
    #[cfg(target_os = "linux")]
    const SPIN: std::time::Duration = std::time::Duration::from_millis(1);

    #[cfg(target_os = "linux")]
    #[derive(Clone, Copy)]
    pub(super) struct Elsewhere {
        /// The CPUs this process may use, and those of them other than the starting
        /// thread's; `None` when there are no others.
        sets: Option<(libc::cpu_set_t, libc::cpu_set_t)>,
    }

    #[cfg(target_os = "linux")]
    impl Elsewhere {
        const SIZE: usize = std::mem::size_of::<libc::cpu_set_t>();

        /// The CPUs around the calling thread, which is about to start the other.
        pub(super) fn here() -> Elsewhere {
            // SAFETY: plain system calls on zeroed sets of the size they are told
            let sets = unsafe {
                let mut all: libc::cpu_set_t = std::mem::zeroed();
                let here = libc::sched_getcpu();
                if libc::sched_getaffinity(0, Self::SIZE, &mut all) != 0 || here < 0 {
                    None
                } else {
                    let mut others = all;
                    libc::CPU_CLR(here as usize, &mut others);
                    (libc::CPU_COUNT(&others) > 0).then_some((all, others))
                }
            };
            Elsewhere { sets }
        }

        /// Moves the calling thread (the new one) off the starting thread's CPU: the first
        /// thing it does, as it may have started there ahead of the starting thread.
        pub(super) fn leave(&self) {
            if let Some((_, others)) = &self.sets {
                // SAFETY: a system call on the calling thread with a full-sized set
                unsafe {
                    libc::sched_setaffinity(0, Self::SIZE, others);
                }
            }
        }

        /// Moves `thread` off this CPU, from the starting thread, in case it has not run yet.
        pub(super) fn send(&self, thread: &std::thread::JoinHandle<()>) {
            use std::os::unix::thread::JoinHandleExt;
            if let Some((_, others)) = &self.sets {
                // SAFETY: the thread handle is alive (a thread that ended already makes
                // the call fail, which is fine: it no longer needs a CPU)
                unsafe {
                    libc::pthread_setaffinity_np(thread.as_pthread_t(), Self::SIZE, others);
                }
            }
        }

        /// How long the thread may spin for its run: a while when it has a CPU of its own.
        pub(super) fn spin(&self) -> std::time::Duration {
            match self.sets {
                Some(_) => SPIN,
                None => std::time::Duration::ZERO,
            }
        }

        /// Lets the calling thread run on every CPU the process may use again.
        pub(super) fn release(&self) {
            if let Some((all, _)) = &self.sets {
                // SAFETY: a system call on the calling thread with a full-sized set
                unsafe {
                    libc::sched_setaffinity(0, Self::SIZE, all);
                }
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    #[derive(Clone, Copy)]
    pub(super) struct Elsewhere;

    #[cfg(not(target_os = "linux"))]
    impl Elsewhere {
        pub(super) fn here() -> Elsewhere {
            Elsewhere
        }
        pub(super) fn leave(&self) {}
        pub(super) fn send(&self, _: &std::thread::JoinHandle<()>) {}
        pub(super) fn spin(&self) -> std::time::Duration {
            std::time::Duration::ZERO
        }
        pub(super) fn release(&self) {}
    }
}

/// Hands a run to the thread [`start`] began, to do with the state made there; the run
/// back when that thread takes none (there is none, or it already did one, or its state
/// was taken by [`take`]).
pub(super) fn submit(job: Job) -> Result<(), Job> {
    SLOT.submit(job)
}

/// The state made ahead, waiting for it if it is on its way; `None` when there is none.
pub(super) fn take() -> Option<Fresh> {
    SLOT.take()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::Ahead;
    use crate::script::prelude::Fresh;

    #[test]
    fn a_state_made_ahead_is_waited_for_and_taken_once() {
        let ahead = Arc::new(Ahead::new());
        assert!(
            ahead.take().is_none(),
            "nothing announced: nothing to wait for"
        );
        ahead.expect(false);
        let maker = Arc::clone(&ahead);
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            maker.make(Fresh::make);
        });
        // announced but not made yet: the taker waits for it rather than getting nothing
        let fresh = ahead.take().expect("the announced state");
        assert!(
            fresh.env.contains_key("tools").unwrap(),
            "the prelude ran: the script environment is there"
        );
        assert!(ahead.take().is_none(), "taken once");
        thread.join().unwrap();
    }

    /// What a handed-over run got, and on which thread it ran.
    fn handed_over(
        ahead: &Arc<Ahead>,
    ) -> (
        Result<(), super::Job>,
        std::sync::mpsc::Receiver<(bool, std::thread::ThreadId)>,
    ) {
        let (sender, receiver) = std::sync::mpsc::channel();
        let job: super::Job = Box::new(move |fresh| {
            let _ = sender.send((fresh.is_some(), std::thread::current().id()));
        });
        (ahead.submit(job), receiver)
    }

    #[test]
    fn a_run_handed_over_runs_with_the_state_on_the_thread_that_made_it() {
        let ahead = Arc::new(Ahead::new());
        ahead.expect(true);
        let server = Arc::clone(&ahead);
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            server.serve(Fresh::make, Duration::ZERO);
        });
        let maker = thread.thread().id();
        // handed over while the state is still being made
        let (submitted, ran) = handed_over(&ahead);
        assert!(submitted.is_ok());
        assert_eq!(
            ran.recv().unwrap(),
            (true, maker),
            "with the state, on its thread"
        );
        thread.join().unwrap();
        // one run only: the next is handed back, for a thread of its own
        assert!(handed_over(&ahead).0.is_err());
        assert!(ahead.take().is_none(), "the state went with the run");
    }

    #[test]
    fn a_state_taken_elsewhere_ends_the_wait_for_a_run_and_hands_later_runs_back() {
        let ahead = Arc::new(Ahead::new());
        ahead.expect(true);
        let server = Arc::clone(&ahead);
        let thread =
            std::thread::spawn(move || server.serve(Fresh::make, Duration::from_millis(20)));
        assert!(ahead.take().is_some(), "Vm::new elsewhere takes the state");
        // the serving thread notices and ends, without a run
        thread.join().unwrap();
        assert!(handed_over(&ahead).0.is_err());
    }

    #[test]
    fn a_run_handed_over_while_making_fails_gets_no_state_and_still_runs() {
        let ahead = Arc::new(Ahead::new());
        ahead.expect(true);
        let (submitted, ran) = handed_over(&ahead);
        assert!(submitted.is_ok());
        let server = Arc::clone(&ahead);
        std::thread::spawn(move || {
            server.serve(|| Err(mlua::Error::runtime("no memory")), Duration::ZERO)
        })
        .join()
        .unwrap();
        assert!(!ran.recv().unwrap().0, "no state: the run makes its own");
        // a maker that panics with no run waiting leaves nothing waiting either
        ahead.expect(true);
        let server = Arc::clone(&ahead);
        assert!(
            std::thread::spawn(
                move || server.serve(|| panic!("a maker that panics"), Duration::ZERO)
            )
            .join()
            .is_err()
        );
        assert!(handed_over(&ahead).0.is_err(), "the thread is gone");
        assert!(ahead.take().is_none());
    }

    /// The thread that makes the state leaves the starting thread's CPU, and may run anywhere
    /// once the state is made.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_making_thread_runs_on_another_cpu_then_anywhere() {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let affinity = move || {
            // SAFETY: a system call on the calling thread with a zeroed, full-sized set
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                assert_eq!(libc::sched_getaffinity(0, size, &mut set), 0);
                set
            }
        };
        let before = affinity();
        // SAFETY: reads the calling thread's CPU
        let here = unsafe { libc::sched_getcpu() };
        let cpus = super::cpu::Elsewhere::here();
        let (during, after) = std::thread::spawn(move || {
            cpus.leave();
            let during = affinity();
            cpus.release();
            (during, affinity())
        })
        .join()
        .unwrap();
        // SAFETY: CPU_ISSET and CPU_COUNT read the sets
        unsafe {
            if libc::CPU_COUNT(&before) > 1 {
                assert!(
                    !libc::CPU_ISSET(here as usize, &during),
                    "off the starting CPU"
                );
                assert_eq!(libc::CPU_COUNT(&during), libc::CPU_COUNT(&before) - 1);
                assert!(cpus.spin() > Duration::ZERO);
            } else {
                assert_eq!(libc::CPU_COUNT(&during), 1, "one CPU: it stays");
                assert_eq!(cpus.spin(), Duration::ZERO, "no spinning on a shared CPU");
            }
            assert_eq!(
                libc::CPU_COUNT(&after),
                libc::CPU_COUNT(&before),
                "anywhere again"
            );
        }
    }

    #[test]
    fn a_failed_or_panicking_maker_does_not_leave_takers_waiting() {
        let ahead = Arc::new(Ahead::new());
        ahead.expect(false);
        ahead.make(|| Err(mlua::Error::runtime("no memory")));
        assert!(ahead.take().is_none());
        ahead.expect(false);
        let maker = Arc::clone(&ahead);
        let panicked = std::thread::spawn(move || maker.make(|| panic!("a maker that panics")))
            .join()
            .is_err();
        assert!(panicked);
        assert!(
            ahead.take().is_none(),
            "the slot was emptied as the maker unwound"
        );
    }
}
