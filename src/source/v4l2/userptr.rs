//! User-pointer capture buffers: frame-slot memory the V4L2 driver writes frames into
//! (`V4L2_MEMORY_USERPTR`), lent to the ring's slots instead of copied out of a driver buffer.
//!
//! Owns: allocating a camera's buffers through its [`SlotAllocator`] (page aligned, whole pages),
//! the loan of a filled buffer to a slot ([`UserBuffers::lend`], a [`LentFrame`]) and the queue
//! through which the loan comes back when the slot lets go of it, on whichever thread that is (the
//! inference worker releases slots).
//! Must not: talk to the device (the source queues returned buffers again; the device module hands
//! the addresses to the kernel), or hand a buffer back for queueing while a slot still holds it.
//!
//! Lifetimes: every buffer's memory is shared ([`Arc`]) by the set, the device that streams into it
//! (which keeps it until the driver has let go: STREAMOFF and close) and the frame a slot holds. A
//! frame that outlives its device (a reconnect while slots hold frames) stays readable; its return
//! then goes to the old set's queue, which nothing reads any more, so the new device never sees it.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::frame::{HeapMemory, LentFrame, SlotAllocator, SlotMemory};
use crate::sys::lock::lock;

/// One user-pointer buffer: slot memory of whole pages, starting on a page boundary.
pub struct UserBuffer {
    memory: Box<dyn SlotMemory>,
    /// Where the bytes start, taken from `as_mut_slice` before the memory was shared: the address
    /// the driver writes through.
    address: usize,
    length: usize,
}

impl UserBuffer {
    /// The address handed to the driver (`v4l2_buffer.m.userptr`).
    pub fn address(&self) -> usize {
        self.address
    }

    /// Bytes the driver may write from [`UserBuffer::address`] (`v4l2_buffer.length`).
    pub fn length(&self) -> usize {
        self.length
    }
}

/// Indices of buffers whose slots let go of them, waiting to be queued again.
#[derive(Default)]
struct Returns {
    indices: Mutex<Vec<u32>>,
    arrived: Condvar,
}

/// The user-pointer buffers of one streaming session and which of them slots hold.
pub struct UserBuffers {
    buffers: Vec<Arc<UserBuffer>>,
    returns: Arc<Returns>,
    /// Per buffer: a slot holds it (dequeued and lent, not yet returned and queued again).
    lent: Vec<bool>,
}

impl UserBuffers {
    /// `count` buffers of at least `frame_bytes` bytes each, in whole pages of `page_size` bytes
    /// starting on a page boundary, from `slots`. Heap memory (the CPU backend's) that does not start
    /// on a page boundary is replaced by page-aligned heap memory; any other memory that does not is
    /// refused. `Err` says why user pointers cannot be used (the source streams mmap buffers then).
    pub fn allocate(
        slots: &SlotAllocator,
        count: u32,
        frame_bytes: usize,
        page_size: usize,
    ) -> Result<UserBuffers, String> {
        let length = frame_bytes
            .checked_next_multiple_of(page_size.max(1))
            .filter(|&length| length > 0)
            .ok_or_else(|| format!("no user-pointer buffer holds {frame_bytes} bytes"))?;
        let mut buffers = Vec::new();
        for _ in 0..count {
            let mut memory =
                slots.allocate(length).map_err(|e| format!("cannot allocate a user-pointer buffer: {e}"))?;
            if !page_aligned(memory.as_slice().as_ptr() as usize, page_size) {
                if !memory.as_any().is::<HeapMemory>() {
                    return Err(format!(
                        "slot memory at {:#x} does not start on a {page_size}-byte page boundary",
                        memory.as_slice().as_ptr() as usize
                    ));
                }
                memory = Box::new(PageAlignedHeap::new(length, page_size));
            }
            if memory.capacity() < length {
                return Err(format!("slot memory of {} bytes is shorter than {length}", memory.capacity()));
            }
            let address = memory.as_mut_slice().as_mut_ptr() as usize;
            buffers.push(Arc::new(UserBuffer { memory, address, length }));
        }
        let lent = vec![false; buffers.len()];
        Ok(UserBuffers { buffers, returns: Arc::default(), lent })
    }

    /// The buffers, in index order, for the device to queue.
    pub fn buffers(&self) -> &[Arc<UserBuffer>] {
        &self.buffers
    }

    /// Keeps only the first `count` buffers (the driver granted fewer).
    pub fn truncate(&mut self, count: usize) {
        self.buffers.truncate(count);
        self.lent.truncate(count);
    }

    /// Lends buffer `index`, just dequeued with `bytes_used` bytes filled, to a slot. `None` for an
    /// index that is not queued (unknown, or already lent: a driver that says so is broken).
    pub fn lend(&mut self, index: u32, bytes_used: usize) -> Option<Box<dyn LentFrame>> {
        let position = usize::try_from(index).ok()?;
        let lent = self.lent.get_mut(position)?;
        if std::mem::replace(lent, true) {
            return None;
        }
        let buffer = self.buffers[position].clone();
        let bytes_used = bytes_used.min(buffer.length);
        Some(Box::new(UserFrame { buffer, index, bytes_used, returns: self.returns.clone() }))
    }

    /// Takes the buffers slots have given back since the last call; they count as queued again,
    /// so the caller must queue each one.
    pub fn take_returned(&mut self) -> Vec<u32> {
        let returned = std::mem::take(&mut *lock(&self.returns.indices));
        for &index in &returned {
            if let Some(lent) = self.lent.get_mut(index as usize) {
                *lent = false;
            }
        }
        returned
    }

    /// Whether slots hold every buffer, so the driver has none to fill.
    pub fn all_lent(&self) -> bool {
        self.lent.iter().all(|&lent| lent)
    }

    /// Waits up to `timeout` for a slot to give a buffer back.
    pub fn wait_for_return(&self, timeout: Duration) {
        let indices = lock(&self.returns.indices);
        if indices.is_empty() {
            // A poisoned lock or a timeout both end the wait; the caller looks again either way.
            let _ = self.returns.arrived.wait_timeout(indices, timeout);
        }
    }
}

fn page_aligned(address: usize, page_size: usize) -> bool {
    page_size > 0 && address.is_multiple_of(page_size)
}

/// A filled user-pointer buffer a slot holds; dropping it queues its index for the source to
/// give back to the driver.
struct UserFrame {
    buffer: Arc<UserBuffer>,
    index: u32,
    bytes_used: usize,
    returns: Arc<Returns>,
}

impl LentFrame for UserFrame {
    fn bytes(&self) -> &[u8] {
        &self.buffer.memory.as_slice()[..self.bytes_used]
    }

    fn memory(&self) -> &dyn SlotMemory {
        self.buffer.memory.as_ref()
    }
}

impl Drop for UserFrame {
    fn drop(&mut self) {
        lock(&self.returns.indices).push(self.index);
        self.returns.arrived.notify_one();
    }
}

/// Heap memory whose bytes start on a page boundary: a page more than asked for is allocated and
/// the slice starts at the first page boundary inside it. Fixed size (never reallocated, so the
/// address handed to the driver stays valid).
pub struct PageAlignedHeap {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl PageAlignedHeap {
    /// `len` zeroed bytes starting on a `page_size` boundary.
    pub fn new(len: usize, page_size: usize) -> PageAlignedHeap {
        let page_size = page_size.max(1);
        let bytes = vec![0; len + page_size];
        let address = bytes.as_ptr() as usize;
        let start = (page_size - address % page_size) % page_size;
        PageAlignedHeap { bytes, start, len }
    }
}

impl SlotMemory for PageAlignedHeap {
    fn capacity(&self) -> usize {
        self.len
    }
    fn reserve(&mut self, len: usize) -> Result<(), String> {
        if len > self.len {
            return Err(format!("{len} bytes exceed a {}-byte user-pointer buffer", self.len));
        }
        Ok(())
    }
    fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len]
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    #[test]
    fn heap_memory_becomes_page_aligned_whole_pages() {
        let buffers = UserBuffers::allocate(&SlotAllocator::heap(), 3, 5000, PAGE).expect("heap");
        assert_eq!(buffers.buffers().len(), 3);
        for buffer in buffers.buffers() {
            assert_eq!(buffer.address() % PAGE, 0);
            assert_eq!(buffer.length(), 2 * PAGE, "5000 bytes round up to two pages");
            assert_eq!(buffer.memory.as_slice().as_ptr() as usize, buffer.address());
        }
    }

    /// Memory that is neither heap memory nor page aligned (a one-byte offset into a vector).
    struct Misaligned(Vec<u8>);

    impl SlotMemory for Misaligned {
        fn capacity(&self) -> usize {
            self.0.len() - 1
        }
        fn reserve(&mut self, len: usize) -> Result<(), String> {
            if len + 1 > self.0.len() {
                self.0.resize(len + 1, 0);
            }
            Ok(())
        }
        fn as_slice(&self) -> &[u8] {
            &self.0[1..]
        }
        fn as_mut_slice(&mut self) -> &mut [u8] {
            &mut self.0[1..]
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    #[test]
    fn memory_of_another_kind_off_a_page_boundary_is_refused_with_the_reason() {
        let misaligned = SlotAllocator::new(|| Ok(Box::new(Misaligned(vec![0; 1]))));
        let err = UserBuffers::allocate(&misaligned, 2, 100, PAGE).err().expect("refused");
        assert!(err.contains("page boundary"), "{err}");
        let failing = SlotAllocator::new(|| Err("out of page-locked memory".into()));
        let err = UserBuffers::allocate(&failing, 2, 100, PAGE).err().expect("refused");
        assert!(err.contains("out of page-locked memory"), "{err}");
    }

    #[test]
    fn a_lent_buffer_comes_back_only_when_its_frame_is_dropped() {
        let mut buffers = UserBuffers::allocate(&SlotAllocator::heap(), 2, 64, PAGE).expect("heap");
        let frame = buffers.lend(1, 40).expect("queued buffer");
        assert_eq!(frame.bytes().len(), 40);
        assert_eq!(frame.memory().as_slice().as_ptr() as usize, buffers.buffers()[1].address());
        assert!(buffers.lend(1, 40).is_none(), "a lent buffer cannot be lent twice");
        assert!(buffers.lend(2, 40).is_none(), "no buffer 2");
        assert!(buffers.take_returned().is_empty());
        let other = buffers.lend(0, 64).expect("queued buffer");
        assert!(buffers.all_lent());
        let worker = std::thread::spawn(move || drop(frame));
        worker.join().expect("worker");
        buffers.wait_for_return(Duration::from_secs(5));
        assert_eq!(buffers.take_returned(), [1]);
        assert!(!buffers.all_lent());
        drop(other);
        assert_eq!(buffers.take_returned(), [0]);
    }

    #[test]
    fn page_aligned_heap_memory_has_a_fixed_size() {
        let mut memory = PageAlignedHeap::new(10, PAGE);
        assert_eq!(memory.as_slice().as_ptr() as usize % PAGE, 0);
        assert_eq!(memory.as_mut_slice().len(), 10);
        assert!(memory.reserve(10).is_ok());
        assert!(memory.reserve(11).is_err());
    }
}
