//! Scratch device memory shared by the execution contexts of one GPU thread.
//!
//! Owns: one arena per (thread, device), sized by [`shared_arena_bytes`] to the largest
//! requirement of the contexts leasing it, and the process-wide ledger that probe/telemetry read
//! ([`arena_report`]). Must not: be shared across threads (the types are `!Send`).
//!
//! Why sharing is sound: contexts on one GPU thread never run at the same time, because every
//! session's `run` synchronises its stream before returning (its outputs are read on the host),
//! so the next context that uses the arena starts after the previous one finished.
//! When a new lease needs more than the arena has, a larger buffer is allocated first, the device
//! is synchronised, the old buffer freed and the generation bumped; each lease re-points its context
//! before the next enqueue ([`ArenaLease::rebind`]). A failed growth leaves the arena as it was.
//!
//! In the daemon a GPU has one inference worker (`crate::infer::scheduler`), so its contexts all live on
//! that worker's thread and lease one arena; the one-shot commands (`selftest`, `detect`) may hold
//! a few contexts on one thread and share it the same way.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{result, CudaContext, DriverError};

use super::arena_plan::{shared_arena_bytes, ArenaPlan};
use super::error::TrtError;
use super::runtime::ExecutionContext;
use crate::sys::lock::lock;

/// Plans of every live arena in the process, by arena id.
static LEDGER: Mutex<BTreeMap<u64, ArenaPlan>> = Mutex::new(BTreeMap::new());
static NEXT_ARENA_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's arenas, by device ordinal. Weak: an arena lives as long as its leases.
    static ARENAS: RefCell<Vec<(usize, Weak<RefCell<ScratchArena>>)>> = const { RefCell::new(Vec::new()) };
}

/// Scratch memory of all live arenas, and what one allocation per context would have taken.
pub fn arena_report() -> ArenaPlan {
    let ledger = lock(&LEDGER);
    ledger.values().fold(ArenaPlan::default(), |total, plan| total + *plan)
}

/// Scratch memory from `cuMemAlloc`, not from the stream-ordered pool that cudarc's allocations
/// use where the device has one: memory freed to that pool stays reserved by the process until a
/// later synchronisation trims it, while a freed arena (a growth, the last lease gone) should go
/// straight back to the device — on a Jetson, to the RAM the OS shares with the GPU. Needs the
/// device's context current on the thread, as every arena call has (its worker's thread).
struct ScratchBuffer {
    ptr: CUdeviceptr,
    bytes: usize,
}

impl ScratchBuffer {
    fn new(bytes: usize) -> Result<ScratchBuffer, DriverError> {
        // SAFETY: plain device memory whose contents TensorRT does not expect to be set; the
        // pointer is owned by the returned value and freed once, in Drop.
        let ptr = unsafe { result::malloc_sync(bytes)? };
        Ok(ScratchBuffer { ptr, bytes })
    }
}

impl Drop for ScratchBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from malloc_sync and is freed only here; the arena synchronises the
        // device before it drops a buffer (`release_buffer`), so no kernel still uses it.
        if let Err(error) = unsafe { result::free_sync(self.ptr) } {
            log::error!("cannot free {} bytes of scratch memory: {error}", self.bytes);
        }
    }
}

struct ScratchArena {
    id: u64,
    context: Arc<CudaContext>,
    buffer: Option<ScratchBuffer>,
    /// Requirement of each live lease, by lease id.
    leases: BTreeMap<u64, u64>,
    next_lease: u64,
    generation: u64,
}

impl ScratchArena {
    fn plan(&self) -> ArenaPlan {
        let requirements: Vec<u64> = self.leases.values().copied().collect();
        shared_arena_bytes(&requirements)
    }

    fn capacity(&self) -> u64 {
        self.buffer.as_ref().map_or(0, |b| b.bytes as u64)
    }

    /// Grows to the plan's size; never shrinks while leased (contexts may point into it).
    ///
    /// The new buffer is allocated before the old one is released, although on a Jetson both come
    /// out of the same RAM for a moment: when the allocation fails, the old buffer and every lease
    /// bound to it stay valid and only the new lease fails. Releasing first would leave the bound
    /// contexts pointing at freed memory.
    fn fit(&mut self) -> Result<(), TrtError> {
        let needed = self.plan().arena_bytes;
        if needed > self.capacity() {
            let bytes = usize::try_from(needed).map_err(|_| TrtError::Cuda(format!("{needed} bytes of scratch")))?;
            let grown = ScratchBuffer::new(bytes)
                .map_err(|e| TrtError::Cuda(format!("cannot allocate {bytes} bytes of scratch memory: {e}")))?;
            self.release_buffer()?;
            self.buffer = Some(grown);
            self.generation += 1;
        }
        self.publish();
        Ok(())
    }

    /// Frees the buffer once no work that uses it can still be running: the contexts that lease it
    /// enqueue on their sessions' own streams, so the whole device context is synchronised first
    /// (growth and the last release are rare, never per frame).
    fn release_buffer(&mut self) -> Result<(), TrtError> {
        if self.buffer.is_some() {
            self.context
                .synchronize()
                .map_err(|e| TrtError::Cuda(format!("cannot wait for the GPU before freeing scratch memory: {e}")))?;
            self.buffer = None;
        }
        Ok(())
    }

    fn publish(&self) {
        let mut ledger = lock(&LEDGER);
        if self.leases.is_empty() {
            ledger.remove(&self.id);
        } else {
            ledger.insert(self.id, self.plan());
        }
    }

    fn device_ptr(&self) -> u64 {
        self.buffer.as_ref().map_or(0, |buffer| buffer.ptr)
    }
}

/// One context's share of its thread's arena.
pub struct ArenaLease {
    arena: Rc<RefCell<ScratchArena>>,
    id: u64,
    bound_generation: u64,
}

impl ArenaLease {
    /// Leases `bytes` of scratch from this thread's arena for device `ordinal`, creating or growing
    /// it as needed. Point a context at it with [`ArenaLease::rebind`] before its first enqueue.
    pub fn acquire(ordinal: usize, context: &Arc<CudaContext>, bytes: u64) -> Result<ArenaLease, TrtError> {
        let arena = ARENAS.with(|arenas| {
            let mut arenas = arenas.borrow_mut();
            arenas.retain(|(_, weak)| weak.strong_count() > 0);
            if let Some(existing) = arenas.iter().find(|(o, _)| *o == ordinal).and_then(|(_, weak)| weak.upgrade()) {
                return existing;
            }
            let arena = Rc::new(RefCell::new(ScratchArena {
                id: NEXT_ARENA_ID.fetch_add(1, Ordering::Relaxed),
                context: Arc::clone(context),
                buffer: None,
                leases: BTreeMap::new(),
                next_lease: 0,
                generation: 0,
            }));
            arenas.push((ordinal, Rc::downgrade(&arena)));
            arena
        });
        let id = {
            let mut state = arena.borrow_mut();
            let id = state.next_lease;
            state.next_lease += 1;
            state.leases.insert(id, bytes);
            if let Err(error) = state.fit() {
                state.leases.remove(&id);
                state.publish();
                return Err(error);
            }
            id
        };
        Ok(ArenaLease { arena, id, bound_generation: u64::MAX })
    }

    /// The arena's buffer as it is now: device address and size (at least this lease's
    /// requirement). Both change when another lease grows the arena.
    pub fn memory(&self) -> (u64, u64) {
        let state = self.arena.borrow();
        (state.device_ptr(), state.capacity())
    }

    /// Re-points `context` at the arena if it was reallocated since the last call. Cheap; call
    /// before every enqueue.
    pub fn rebind(&mut self, context: &mut ExecutionContext) -> Result<(), TrtError> {
        let state = self.arena.borrow();
        if state.generation != self.bound_generation {
            // SAFETY: the buffer holds at least this lease's requirement (`fit` sized it to the
            // maximum) and stays allocated until the generation changes, after which every lease
            // rebinds before its next enqueue; contexts sharing it never run concurrently (module doc).
            unsafe { context.set_device_memory(state.device_ptr(), state.capacity())? };
            self.bound_generation = state.generation;
        }
        Ok(())
    }
}

impl Drop for ArenaLease {
    fn drop(&mut self) {
        let mut state = self.arena.borrow_mut();
        state.leases.remove(&self.id);
        if state.leases.is_empty() {
            if let Err(error) = state.release_buffer() {
                // The GPU is in an error state: freeing now could free memory a kernel still uses,
                // so the buffer is leaked instead (the process is about to report the error anyway).
                log::error!("{error}; keeping {} bytes of scratch memory allocated", state.capacity());
                if let Some(buffer) = state.buffer.take() {
                    std::mem::forget(buffer);
                }
            }
        }
        state.publish();
    }
}
