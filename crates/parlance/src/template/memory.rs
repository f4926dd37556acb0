//! A memory bound for rendering untrusted templates.
//!
//! Fuel bounds instructions, not bytes: `{% set s = s ~ s %}` doubles a string per instruction, so a
//! few dozen instructions exhaust any machine, and Rust aborts the process when an allocation fails.
//! Nothing inside minijinja can be hooked per operation, so the bound sits in the allocator:
//!
//! - A binary that renders untrusted templates installs [`GuardedAllocator`] as its global
//!   allocator (`parlance` the CLI does). It forwards to the system allocator (to mimalloc with the
//!   crate's `mimalloc` feature, which the CLI and the Python module turn on) and, on a thread that
//!   runs a bounded render, counts the bytes that thread holds.
//! - With the guard installed, `ChatTemplate::render` runs each render on a render thread with a
//!   budget ([`run_bounded`]); a thread whose render ended normally waits for the next one (at most
//!   eight wait), since starting one costs more than a short render. An allocation past the budget is never made: the allocator signals
//!   the waiting caller and puts the render thread to sleep for good, because a global allocator
//!   may neither fail gracefully (that aborts) nor unwind (undefined behaviour). The caller gets a
//!   `TemplateError::Limit` for `memory bytes`.
//!
//! The same thread carries a wall-clock budget: fuel counts instructions, not their cost (one
//! `s ~ s` copies megabytes), so a caller that has waited `max_time` gives up, and the render
//! thread is stopped at its next allocation the same way (a render that spends its time copying
//! strings allocates all the time). The caller gets a `TemplateError::Limit` for `wall-clock
//! milliseconds`.
//!
//! The cost of a refused render is the memory it held when stopped (at most the budget) and one
//! sleeping thread, for the life of the process: nothing else can be done safely (the thread can
//! neither fail the allocation nor unwind from it, and other threads may hold what it allocated).
//! That cost is bounded for the whole process: once refused renders hold [`parked_limit`] bytes
//! (default 2 GiB) or [`MAX_PARKED_THREADS`] threads, every later bounded render is refused at
//! once ([`Stopped::Exhausted`]) instead of growing the process until the system kills it. A server
//! that sees that error should restart the process (and stop accepting the templates that caused
//! it); [`parked`] says how much is held.
//!
//! Without the guard installed, renders run inline and memory is bounded only by the output limit,
//! fuel and minijinja's own caps (100 MB per string repetition): a template can still exhaust the
//! machine with a few string doublings, and wall time is bounded only by fuel.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What [`GuardedAllocator`] forwards to: mimalloc with the crate's `mimalloc` feature (the CLI and
/// the Python module turn it on: glibc's malloc spends a quarter of grammar compilation in its own
/// bookkeeping), else the system allocator.
#[cfg(feature = "mimalloc")]
const INNER: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(not(feature = "mimalloc"))]
const INNER: std::alloc::System = std::alloc::System;

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Most threads refused renders may leave asleep before bounded renders are refused at once.
pub const MAX_PARKED_THREADS: usize = 64;

/// Bytes held by the threads of refused renders, and how many there are (see the module docs).
static PARKED_BYTES: AtomicUsize = AtomicUsize::new(0);
static PARKED_THREADS: AtomicUsize = AtomicUsize::new(0);
static PARKED_LIMIT: AtomicUsize = AtomicUsize::new(2 << 30);

/// The most bytes refused renders may hold in all before bounded renders are refused at once.
pub fn parked_limit() -> usize {
    PARKED_LIMIT.load(Ordering::Relaxed)
}

/// Sets [`parked_limit`].
pub fn set_parked_limit(bytes: usize) {
    PARKED_LIMIT.store(bytes, Ordering::Relaxed);
}

/// `(threads, bytes)` that refused renders hold asleep in this process.
pub fn parked() -> (usize, usize) {
    (PARKED_THREADS.load(Ordering::Relaxed), PARKED_BYTES.load(Ordering::Relaxed))
}

/// Stack of a bounded render thread (address space; pages are committed only when touched). Deep
/// enough for the recursion limit in debug builds and for dropping the most deeply nested value the
/// default fuel can build (minijinja drops nested values recursively, ~20-60 bytes a level).
const RENDER_STACK_BYTES: usize = 256 << 20;

thread_local! {
    /// Bytes the current thread may still allocate, when it runs a bounded render.
    static REMAINING: Cell<isize> = const { Cell::new(0) };
    /// The current bounded render's whole budget.
    static BUDGET: Cell<isize> = const { Cell::new(0) };
    /// Whether the current thread runs a bounded render.
    static BOUNDED: Cell<bool> = const { Cell::new(false) };
    /// Where to report that the budget ran out.
    static SIGNAL: Cell<*const Signal> = const { Cell::new(std::ptr::null()) };
}

/// The global allocator that makes render memory limits enforceable; see the module docs.
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: parlance::template::memory::GuardedAllocator = parlance::template::memory::GuardedAllocator;
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct GuardedAllocator;

/// Whether [`GuardedAllocator`] is this process's global allocator.
pub fn is_installed() -> bool {
    // Any allocation through the guard sets the flag; make one so the answer does not depend on
    // whether one happened yet.
    drop(std::hint::black_box(Box::new(0u8)));
    INSTALLED.load(Ordering::Relaxed)
}

/// Shared between a bounded render thread and its caller.
struct Signal {
    state: Mutex<bool>,
    changed: Condvar,
    exceeded: AtomicBool,
    /// The caller stopped waiting: the render thread stops at its next allocation.
    expired: AtomicBool,
    /// The render ended (set after `state`), for a caller that waits without sleeping.
    finished: AtomicBool,
}

/// How long a caller, and an idle render thread, wait for the other without sleeping.
const SPIN: Duration = Duration::from_micros(50);

impl GuardedAllocator {
    #[inline]
    fn charge(size: usize) {
        // `try_with`: thread-locals may be gone while a thread exits; then there is nothing to bound.
        let _ = BOUNDED.try_with(|bounded| {
            if !bounded.get() {
                return;
            }
            let remaining = REMAINING.get() - size as isize;
            REMAINING.set(remaining);
            let signal = SIGNAL.get();
            // SAFETY: as in `stop_thread`: the `Signal` outlives the pointer.
            let expired = !signal.is_null() && unsafe { &*signal }.expired.load(Ordering::Relaxed);
            if remaining < 0 || expired {
                // The allocation is not made: it is not held.
                REMAINING.set(remaining + size as isize);
                bounded.set(false);
                Self::stop_thread();
            }
        });
    }

    #[inline]
    fn refund(size: usize) {
        let _ = BOUNDED.try_with(|bounded| {
            if bounded.get() {
                REMAINING.set(REMAINING.get() + size as isize);
            }
        });
    }

    /// Reports the exceeded budget and never returns: the allocation is not made.
    #[cold]
    fn stop_thread() -> ! {
        // mimalloc keeps the pages a thread freed for that thread's next allocations, and this
        // thread makes none: give them back now, so a stopped render holds only what it still
        // uses (a string doubled to the limit freed as much as it holds). Not inside mimalloc here:
        // the allocation that stopped the thread was never passed on.
        #[cfg(feature = "mimalloc")]
        // SAFETY: a plain call into the allocator from the thread that owns the heap, outside any
        // allocator call.
        unsafe {
            libmimalloc_sys::mi_collect(true);
        }
        // What this thread keeps for good (atomics: no allocation here).
        let held = (BUDGET.get() - REMAINING.get()).max(0) as usize;
        PARKED_BYTES.fetch_add(held, Ordering::SeqCst);
        PARKED_THREADS.fetch_add(1, Ordering::SeqCst);
        let signal = SIGNAL.get();
        if !signal.is_null() {
            // SAFETY: `run_bounded` keeps the `Signal` alive (an `Arc` held by this thread's
            // closure, which never returns from here) for as long as the pointer is set.
            let signal = unsafe { &*signal };
            signal.exceeded.store(true, Ordering::SeqCst);
            // Locking and notifying do not allocate (futex-based on the platforms we support).
            let mut done = signal.state.lock().unwrap_or_else(|e| e.into_inner());
            *done = true;
            signal.changed.notify_all();
            drop(done);
        }
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

// SAFETY: every method forwards to `INNER` with the caller's layout and pointer unchanged; the
// bookkeeping around it touches only const-initialized thread-locals, which do not allocate.
unsafe impl GlobalAlloc for GuardedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        Self::charge(layout.size());
        // SAFETY: same contract as ours.
        unsafe { INNER.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        Self::charge(layout.size());
        // SAFETY: same contract as ours.
        unsafe { INNER.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::refund(layout.size());
        // SAFETY: same contract as ours.
        unsafe { INNER.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            Self::charge(new_size - layout.size());
        } else {
            Self::refund(layout.size() - new_size);
        }
        // SAFETY: same contract as ours.
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
}

/// Why a bounded job returned no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stopped {
    /// It tried to allocate past its budget; its thread is left asleep (see the module docs).
    Memory,
    /// It ran past its wall-clock budget; its thread is stopped at its next allocation.
    Time,
    /// It panicked.
    Panic,
    /// No thread could be started for it.
    NoThread,
    /// Not started: refused renders already hold [`parked_limit`] bytes or [`MAX_PARKED_THREADS`]
    /// threads (see the module docs).
    Exhausted,
}

/// Runs `job` on a new thread that may allocate at most `max_bytes`, waiting for it at most
/// `max_time`.
pub fn run_bounded<R, F>(max_bytes: usize, max_time: Duration, job: F) -> Result<R, Stopped>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    let (threads, bytes) = parked();
    if threads >= MAX_PARKED_THREADS || bytes.saturating_add(max_bytes) > parked_limit() {
        return Err(Stopped::Exhausted);
    }
    let signal = Arc::new(Signal {
        state: Mutex::new(false),
        changed: Condvar::new(),
        exceeded: AtomicBool::new(false),
        expired: AtomicBool::new(false),
        finished: AtomicBool::new(false),
    });
    let result: Arc<Mutex<Option<R>>> = Arc::new(Mutex::new(None));
    let (thread_signal, thread_result) = (Arc::clone(&signal), Arc::clone(&result));
    let bounded: RenderJob = Box::new(move || {
        SIGNAL.set(Arc::as_ptr(&thread_signal));
        REMAINING.set(isize::try_from(max_bytes).unwrap_or(isize::MAX));
        BUDGET.set(isize::try_from(max_bytes).unwrap_or(isize::MAX));
        BOUNDED.set(true);
        let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).ok();
        BOUNDED.set(false);
        SIGNAL.set(std::ptr::null());
        *thread_result.lock().unwrap_or_else(|e| e.into_inner()) = value;
        *thread_signal.state.lock().unwrap_or_else(|e| e.into_inner()) = true;
        thread_signal.finished.store(true, Ordering::Release);
        thread_signal.changed.notify_all();
    });
    if run_on_render_thread(bounded).is_err() {
        // No thread to spare: refuse rather than render unbounded.
        return Err(Stopped::NoThread);
    }
    let deadline = std::time::Instant::now().checked_add(max_time);
    // Most renders take microseconds: wait for them a moment without sleeping, since waking a
    // sleeping thread costs tens of microseconds.
    let spin_until = std::time::Instant::now() + SPIN;
    while !signal.finished.load(Ordering::Acquire) && std::time::Instant::now() < spin_until {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
    let mut done = signal.state.lock().unwrap_or_else(|e| e.into_inner());
    while !*done {
        let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        if left == Some(Duration::ZERO) {
            signal.expired.store(true, Ordering::SeqCst);
            return Err(Stopped::Time);
        }
        done = match left {
            Some(left) => signal.changed.wait_timeout(done, left).unwrap_or_else(|e| e.into_inner()).0,
            None => signal.changed.wait(done).unwrap_or_else(|e| e.into_inner()),
        };
    }
    drop(done);
    if signal.exceeded.load(Ordering::SeqCst) {
        return Err(Stopped::Memory);
    }
    result.lock().unwrap_or_else(|e| e.into_inner()).take().ok_or(Stopped::Panic)
}

/// A bounded render as its thread runs it (budget set up and torn down inside).
type RenderJob = Box<dyn FnOnce() + Send>;

/// Render threads waiting for their next job. Starting a thread with the render stack costs more
/// than a short render (~100 µs: the stack is mapped and unmapped each time), so a thread whose
/// render ended normally waits here for the next one; one stopped by its budget never comes back.
static IDLE_RENDER_THREADS: Mutex<Vec<std::sync::mpsc::Sender<RenderJob>>> = Mutex::new(Vec::new());

/// Most render threads kept waiting; past it, a thread whose render ended exits.
const MAX_IDLE_RENDER_THREADS: usize = 8;

/// Runs `job` on an idle render thread, or on a new one.
fn run_on_render_thread(job: RenderJob) -> std::io::Result<()> {
    let idle = IDLE_RENDER_THREADS.lock().unwrap_or_else(|e| e.into_inner()).pop();
    let job = match idle {
        Some(thread) => match thread.send(job) {
            Ok(()) => return Ok(()),
            // That thread is gone: a new one takes the job.
            Err(std::sync::mpsc::SendError(job)) => job,
        },
        None => job,
    };
    std::thread::Builder::new().name("parlance-render".into()).stack_size(RENDER_STACK_BYTES).spawn(move || {
        job();
        let (sender, jobs) = std::sync::mpsc::channel::<RenderJob>();
        loop {
            {
                let mut idle = IDLE_RENDER_THREADS.lock().unwrap_or_else(|e| e.into_inner());
                if idle.len() >= MAX_IDLE_RENDER_THREADS {
                    return;
                }
                idle.push(sender.clone());
            }
            // The next render often follows at once: look for it a moment before sleeping.
            let spin_until = std::time::Instant::now() + SPIN;
            let mut next = jobs.try_recv().ok();
            while next.is_none() && std::time::Instant::now() < spin_until {
                std::hint::spin_loop();
                next = jobs.try_recv().ok();
            }
            match next.map_or_else(|| jobs.recv(), Ok) {
                Ok(job) => job(),
                Err(_) => return,
            }
        }
    })?;
    Ok(())
}
