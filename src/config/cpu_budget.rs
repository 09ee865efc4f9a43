//! The CPU backend's one budget of cores: how the `device.cpu_threads` cores are split among the
//! inference workers, and what each worker does with its share.
//!
//! Owns: [`CpuBudget`], the single place that decides how many inference workers run N cameras
//! (`device.cpu_workers`, else one per camera, at most one per core), how many threads each
//! worker has, and which CPUs each worker's threads are kept to. A worker's threads are all it may
//! keep busy: its engine's intra-op threads (the worker's own thread among them) and its
//! preprocessing threads, which take turns — the engine's threads stop spinning when an inference
//! returns, preprocessing runs only between inferences — so the workers together never ask for
//! more than the budget's cores. Several workers each get CPUs of their own (as many as their
//! threads), so that a worker's threads, woken after every inference and every preprocessing,
//! never wait for a core another worker's inference holds. Must not: create threads, pin them, or
//! know an engine (the CPU backend applies the shares).
//!
//! Why one session per camera with few threads each, not one pool shared by every worker: a
//! small detector uses extra threads poorly. ONNX Runtime's own Python API on a 16-core Xeon runs
//! SSD MobileNet v2 at 588 inferences/s as 16 sessions × 1 thread, 541 as 8 × 2 and 254 as
//! 1 × 16, while the daemon's 8 workers sharing one 16-thread pool ran 8 cameras at 268–311
//! frames/s: the shared pool's threads spun between other workers' inferences, and preprocessing
//! ran on 16 threads of its own against them (docs/src/performance/cpu-engines.md has the runs).

use std::num::NonZeroUsize;

/// The cores of the CPU backend and the inference workers that share them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuBudget {
    cores: usize,
    workers: usize,
}

impl CpuBudget {
    /// `workers` workers sharing `cores` cores (each at least 1).
    pub fn new(cores: usize, workers: usize) -> CpuBudget {
        CpuBudget { cores: cores.max(1), workers: workers.max(1) }
    }

    /// The budget for `cameras` cameras: `configured` workers (`device.cpu_workers`), else one
    /// per camera and at most one per core; configured or not, at least 1 and at most one per
    /// camera (a camera never has two frames in inference, so more would only idle).
    pub fn for_cameras(cores: usize, configured: Option<NonZeroUsize>, cameras: usize) -> CpuBudget {
        let cores = cores.max(1);
        let workers = configured.map_or(cameras.min(cores), NonZeroUsize::get).min(cameras);
        CpuBudget::new(cores, workers)
    }

    /// The cores in all.
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// The inference workers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Threads of worker `worker` (0-based): an equal share of the cores, the first
    /// `cores % workers` workers one more, so that the shares add up to the cores; at least 1
    /// (more workers than cores — only a configured `device.cpu_workers` asks for that — get one
    /// thread each).
    pub fn threads_of(&self, worker: usize) -> usize {
        let share = self.cores / self.workers + usize::from(worker < self.cores % self.workers);
        share.max(1)
    }

    /// Every worker's threads, in worker order.
    pub fn shares(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.workers).map(|worker| self.threads_of(worker))
    }

    /// The CPUs worker `worker`'s threads are kept to, out of `allowed` (the CPUs this process may
    /// use, in order): the next [`threads_of`](Self::threads_of) of them after the earlier
    /// workers' shares, so no two workers share one. `None` (run anywhere) for a worker alone,
    /// which has every core anyway, and when the budget does not fit `allowed` (more cores than
    /// CPUs, or more workers than cores): then shares of CPUs would overlap.
    pub fn cpus_of(&self, worker: usize, allowed: &[usize]) -> Option<Vec<usize>> {
        if self.workers < 2 || self.workers > self.cores || self.cores > allowed.len() || worker >= self.workers {
            return None;
        }
        let first: usize = (0..worker).map(|earlier| self.threads_of(earlier)).sum();
        allowed.get(first..first + self.threads_of(worker)).map(<[usize]>::to_vec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_camera_gets_a_worker_until_every_core_has_one() {
        assert_eq!(CpuBudget::for_cameras(16, None, 1).workers(), 1);
        assert_eq!(CpuBudget::for_cameras(16, None, 8).workers(), 8);
        assert_eq!(CpuBudget::for_cameras(16, None, 16).workers(), 16);
        assert_eq!(CpuBudget::for_cameras(16, None, 40).workers(), 16, "at most one per core");
        assert_eq!(CpuBudget::for_cameras(2, None, 8).workers(), 2);
        assert_eq!(CpuBudget::for_cameras(16, None, 0).workers(), 1, "at least one");
        assert_eq!(CpuBudget::for_cameras(0, None, 3).workers(), 1, "a budget has at least one core");
    }

    #[test]
    fn a_configured_worker_count_is_taken_but_never_more_than_one_per_camera() {
        let four = NonZeroUsize::new(4);
        assert_eq!(CpuBudget::for_cameras(2, four, 8).workers(), 4);
        assert_eq!(CpuBudget::for_cameras(16, four, 1).workers(), 1);
        assert_eq!(CpuBudget::for_cameras(16, four, 8).workers(), 4);
    }

    #[test]
    fn the_shares_of_the_workers_add_up_to_the_cores() {
        for cores in 1..=20 {
            for cameras in 1..=24 {
                let budget = CpuBudget::for_cameras(cores, None, cameras);
                let shares: Vec<usize> = budget.shares().collect();
                assert_eq!(shares.iter().sum::<usize>(), cores, "{cores} cores, {cameras} cameras: {shares:?}");
                let (fewest, most) = (shares.iter().min(), shares.iter().max());
                assert!(most.zip(fewest).is_some_and(|(m, f)| m - f <= 1), "uneven: {shares:?}");
            }
        }
        let budget = CpuBudget::new(16, 5);
        assert_eq!(budget.shares().collect::<Vec<_>>(), [4, 3, 3, 3, 3]);
        assert_eq!(CpuBudget::new(16, 1).threads_of(0), 16, "one worker alone has every core");
    }

    #[test]
    fn several_workers_get_cpus_of_their_own_as_many_as_their_threads() {
        let allowed: Vec<usize> = (0..16).collect();
        let budget = CpuBudget::new(16, 5);
        let cpus: Vec<Vec<usize>> = (0..5).filter_map(|worker| budget.cpus_of(worker, &allowed)).collect();
        assert_eq!(cpus, [vec![0, 1, 2, 3], vec![4, 5, 6], vec![7, 8, 9], vec![10, 11, 12], vec![13, 14, 15]]);
        let gaps = [2, 3, 5, 7, 11, 13];
        assert_eq!(CpuBudget::new(4, 2).cpus_of(1, &gaps), Some(vec![5, 7]), "the allowed CPUs, in order");
        assert_eq!(CpuBudget::new(4, 4).cpus_of(3, &gaps), Some(vec![7]));
    }

    #[test]
    fn a_worker_alone_or_a_budget_that_does_not_fit_the_cpus_runs_anywhere() {
        let allowed: Vec<usize> = (0..8).collect();
        assert_eq!(CpuBudget::new(8, 1).cpus_of(0, &allowed), None, "a worker alone has every core");
        assert_eq!(CpuBudget::new(16, 4).cpus_of(0, &allowed), None, "more cores than CPUs");
        assert_eq!(CpuBudget::for_cameras(2, NonZeroUsize::new(4), 8).cpus_of(0, &allowed), None, "workers > cores");
        assert_eq!(CpuBudget::new(8, 2).cpus_of(2, &allowed), None, "no such worker");
    }

    #[test]
    fn more_configured_workers_than_cores_get_one_thread_each() {
        let budget = CpuBudget::for_cameras(2, NonZeroUsize::new(4), 8);
        assert_eq!(budget.shares().collect::<Vec<_>>(), [1, 1, 1, 1]);
    }
}
