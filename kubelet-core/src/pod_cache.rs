//! The pod cache: each pod's runtime state as its worker last read it, served again while
//! the PLEG has seen no change of the pod since (Go's `kubecontainer.Cache`, which its pod
//! workers read with `GetNewerThan`). A periodic resync of a steady pod then costs no runtime
//! call; before, each resync (every 60–90 s) read the pod: two listings and a status call per
//! sandbox and container.
//!
//! # Observations and stamps
//! The PLEG *observes* the runtime: a relist begins ([`PodCache::begin`]), lists, and ends
//! ([`PodCache::observed`]) naming the pods it found changed; a stream event names its pod
//! alone ([`PodCache::changed`]); the evented PLEG's heartbeat is an observation with no
//! change (as Go's evented PLEG moves its cache's global time forward). Each of these moves a
//! logical clock one tick on; a change is *known* at the tick of the end or the event that
//! reported it, an observation *began* at the tick of its begin.
//!
//! A worker takes a [`Stamp`] (the clock) *before* it reads a pod and stores the reading with
//! it. A store is refused when a change of the pod became known after the stamp: the reading
//! may predate it (a change known at or before the stamp happened before the read, so the
//! reading has it). A stored reading is served while all of these hold:
//! - an observation begun after the stamp has ended: any change after that observation's
//!   listing is then not yet seen, but nor would it be by a sync just before the change — the
//!   staleness is the PLEG's own latency (≤ one relist period, or the event stream's delay),
//!   after which the change's event wakes the worker anyway;
//! - no change of the pod became known since ([`PodCache::changed`] and
//!   [`PodCache::observed`] drop the reading), and no observation failed since
//!   ([`PodCache::observation_failed`] drops every reading and refuses the reads in flight);
//! - the PLEG is keeping up: the last observation ended within the cache's maximum age
//!   (three relist periods), so a PLEG stuck on a call or a full queue does not leave old
//!   readings served.
//!
//! A stored reading only ever stands for a steady pod's status: a sync whose reading came
//! from the cache and that finds something to do (a container to start or kill) acts on a
//! fresh one instead ([`Source`]), so the PLEG's latency never becomes a wrong action (a
//! container started twice because an object a timed-out call created was not seen yet).
//!
//! # States of one pod's slot
//!
//! | state | left when |
//! |---|---|
//! | **absent** | a worker stores a reading → **stored**; a change becomes known → **changed** |
//! | **stored** (reading, stamp) | a change becomes known → **changed**; its worker removes it (it is about to act on the pod, or stops it) → **absent** |
//! | **changed** (tick the change became known) | a store stamped at or after that tick → **stored** (one stamped before it is refused); pruned [`CHANGE_MEMORY`] after the change → **absent** |
//!
//! Pruning a **changed** slot raises a floor: a store stamped before the pruned change is
//! refused (the change it may have missed is no longer known). Only readings in flight for
//! longer than [`CHANGE_MEMORY`] are refused that way (pruned at the next observation, the
//! floor would refuse the reads in flight of every pod whenever any pod changed, as during a
//! start); at rest nothing is pruned.
//!
//! # Who may call
//! The PLEG task calls `begin`, `observed`, `changed` and `observation_failed`; a pod's worker
//! calls `read` and `remove` for its own pod only (workers are serialized per pod, so a
//! worker's own store never races its own removal). Every call takes one short lock, never
//! held across an `.await`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::pod_status::{self, PodRuntimeStatus};
use crate::runtime::{ContainerRuntime, RuntimeResult};

/// How long a change is remembered for refusing the stores that may have missed it.
pub(crate) const CHANGE_MEMORY: Duration = Duration::from_secs(60);

/// Where [`PodCache::read`] got the pod's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A stored reading: fit for the status, not for acting on.
    Stored,
    /// The runtime, just now.
    Runtime,
}

/// A tick of the cache's logical clock: a reading's stamp, an observation's begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stamp(u64);

#[derive(Debug)]
struct Slot {
    /// The stored reading and its stamp (`None`: changed since).
    reading: Option<(Arc<PodRuntimeStatus>, Stamp)>,
    /// When a change of the pod last became known (tick and time), if one did.
    changed: Option<(Stamp, Instant)>,
}

#[derive(Debug, Default)]
struct Inner {
    slots: HashMap<String, Slot>,
    /// The logical clock.
    tick: u64,
    /// When the newest ended observation began: readings stamped before it are current.
    current_from: u64,
    /// Stores stamped before this are refused (see the module docs).
    refuse_below: u64,
    /// When the newest observation ended.
    last_ended: Option<Instant>,
}

impl Inner {
    fn tick(&mut self) -> Stamp {
        self.tick += 1;
        Stamp(self.tick)
    }

    fn mark_changed(&mut self, uid: &str, at: Stamp) {
        let slot = self.slots.entry(uid.to_string()).or_insert(Slot {
            reading: None,
            changed: None,
        });
        slot.reading = None;
        if slot.changed.is_none_or(|(c, _)| c < at) {
            slot.changed = Some((at, Instant::now()));
        }
    }

    /// Forgets the changes known longer than `memory` ago of pods without a reading, raising
    /// the floor to the newest of them.
    fn prune(&mut self, memory: Duration) {
        let mut refuse_below = self.refuse_below;
        self.slots
            .retain(|_, slot| match (&slot.reading, slot.changed) {
                (None, Some((c, at))) if at.elapsed() >= memory => {
                    refuse_below = refuse_below.max(c.0);
                    false
                }
                _ => true,
            });
        self.refuse_below = refuse_below;
    }
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct PodCache {
    inner: Mutex<Inner>,
    /// How long after the last observation ended stored readings are still served.
    max_age: Duration,
}

impl PodCache {
    /// A cache whose readings are served while an observation ended within `max_age`.
    pub fn new(max_age: Duration) -> Self {
        PodCache {
            inner: Mutex::default(),
            max_age,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stamp of a reading about to be taken.
    pub fn stamp(&self) -> Stamp {
        Stamp(self.lock().tick)
    }

    /// The stored reading of the pod, if it is current (see the module docs).
    pub fn get(&self, uid: &str) -> Option<Arc<PodRuntimeStatus>> {
        let inner = self.lock();
        let (reading, stamp) = inner.slots.get(uid)?.reading.as_ref()?;
        let keeping_up = inner
            .last_ended
            .is_some_and(|t| t.elapsed() <= self.max_age);
        (keeping_up && stamp.0 < inner.current_from).then(|| reading.clone())
    }

    /// Stores a reading taken after `stamp`; false when refused (a change of the pod became
    /// known after the stamp, or the stamp is below the floor).
    pub fn store(&self, uid: &str, stamp: Stamp, reading: Arc<PodRuntimeStatus>) -> bool {
        let mut inner = self.lock();
        if stamp.0 < inner.refuse_below {
            return false;
        }
        match inner.slots.get_mut(uid) {
            Some(slot) if slot.changed.is_some_and(|(c, _)| c > stamp) => false,
            Some(slot) => {
                slot.reading = Some((reading, stamp));
                true
            }
            None => {
                inner.slots.insert(
                    uid.to_string(),
                    Slot {
                        reading: Some((reading, stamp)),
                        changed: None,
                    },
                );
                true
            }
        }
    }

    /// The pod's state: the stored reading when current, else read from the runtime now
    /// (and stored); and which of the two it is.
    pub async fn read(
        &self,
        runtime: &dyn ContainerRuntime,
        uid: &str,
    ) -> RuntimeResult<(PodRuntimeStatus, Source)> {
        if let Some(reading) = self.get(uid) {
            return Ok((PodRuntimeStatus::clone(&reading), Source::Stored));
        }
        let stamp = self.stamp();
        let status = pod_status::fetch(runtime, uid).await?;
        self.store(uid, stamp, Arc::new(status.clone()));
        Ok((status, Source::Runtime))
    }

    /// Forgets the pod (its worker is about to change it, or stops it).
    pub fn remove(&self, uid: &str) {
        self.lock().slots.remove(uid);
    }

    /// An observation begins (before it lists the runtime): its begin, for [`Self::observed`].
    pub fn begin(&self) -> Stamp {
        self.lock().tick()
    }

    /// A change of the pod is known now (a stream event).
    pub fn changed(&self, uid: &str) {
        let mut inner = self.lock();
        let now = inner.tick();
        inner.mark_changed(uid, now);
    }

    /// The observation begun at `began` ended, having seen these pods change: their readings
    /// are dropped; every other reading stamped before `began` is current.
    pub fn observed<'a>(&self, began: Stamp, changed: impl IntoIterator<Item = &'a str>) {
        let mut inner = self.lock();
        let now = inner.tick();
        for uid in changed {
            inner.mark_changed(uid, now);
        }
        inner.current_from = inner.current_from.max(began.0);
        inner.last_ended = Some(Instant::now());
        inner.prune(CHANGE_MEMORY);
    }

    /// [`CHANGE_MEMORY`] for tests: forgets the changes known longer than `memory` ago.
    #[cfg(test)]
    pub fn prune_changes(&self, memory: Duration) {
        self.lock().prune(memory);
    }

    /// An observation failed (the runtime did not answer the relist): nothing stored is
    /// vouched for any more, so every pod is read afresh until observations succeed again
    /// (Go's workers wait for a newer cache instead; here the read fails as the runtime does).
    pub fn observation_failed(&self) {
        let mut inner = self.lock();
        let now = inner.tick();
        inner.refuse_below = now.0;
        for slot in inner.slots.values_mut() {
            slot.reading = None;
        }
    }
}

#[cfg(test)]
#[path = "pod_cache_tests.rs"]
mod tests;
