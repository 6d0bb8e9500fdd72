//! The graceful node shutdown inhibitor on the wire: a real `dbus-daemon` (a private bus)
//! with stand-ins for `org.freedesktop.login1` (systemd-logind's `Inhibit` → a file
//! descriptor, `InhibitDelayMaxUSec`, `PrepareForShutdown`) and `org.freedesktop.systemd1`
//! (`KillUnit`, which here rereads the logind override the way logind's SIGHUP does). What
//! a real logind does with the lock is tested on a systemd host (the VM tier).
//!
//! Needs `dbus-daemon` (Debian's `dbus-daemon`, installed by `scripts/node-env.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{daemon, daemon_at};
use kubelet_cm::logind::{LogindInhibitor, LOGIND_CONF_FILE};
use kubelet_core::nodeshutdown::{ShutdownError, ShutdownInhibitor};
use zbus::zvariant::OwnedFd;

/// One `Inhibit` call: what, who, why, mode.
type InhibitCall = (String, String, String, String);

/// logind's side: the delay it allows and the far ends of the locks it handed out.
#[derive(Default)]
struct Logind {
    delay_usec: Arc<Mutex<u64>>,
    held: Arc<Mutex<Vec<UnixStream>>>,
    inhibits: Arc<Mutex<Vec<InhibitCall>>>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Logind {
    async fn inhibit(
        &self,
        what: String,
        who: String,
        why: String,
        mode: String,
    ) -> zbus::fdo::Result<OwnedFd> {
        self.inhibits.lock().unwrap().push((what, who, why, mode));
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        self.held.lock().unwrap().push(ours);
        Ok(std::os::fd::OwnedFd::from(theirs).into())
    }

    #[zbus(property, name = "InhibitDelayMaxUSec")]
    async fn inhibit_delay_max_usec(&self) -> u64 {
        *self.delay_usec.lock().unwrap()
    }
}

/// systemd's side: `KillUnit(systemd-logind.service, all, SIGHUP)` makes "logind" read the
/// override (unless it is stubborn).
struct Systemd {
    conf: PathBuf,
    delay_usec: Arc<Mutex<u64>>,
    stubborn: bool,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Systemd {
    async fn kill_unit(&self, unit: String, who: String, signal: i32) {
        assert_eq!(
            (unit.as_str(), who.as_str(), signal),
            ("systemd-logind.service", "all", 1)
        );
        if self.stubborn {
            return;
        }
        let text = std::fs::read_to_string(self.conf.join(LOGIND_CONF_FILE)).unwrap();
        let secs: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("InhibitDelayMaxSec="))
            .unwrap()
            .parse()
            .unwrap();
        *self.delay_usec.lock().unwrap() = secs * 1_000_000;
    }
}

struct Host {
    login: zbus::Connection,
    _systemd: zbus::Connection,
    logind: Logind,
    conf: PathBuf,
    _dir: tempfile::TempDir,
}

async fn host(address: &str, delay_secs: u64, stubborn: bool) -> Host {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("logind.conf.d");
    let logind = Logind::default();
    *logind.delay_usec.lock().unwrap() = delay_secs * 1_000_000;
    let served = Logind {
        delay_usec: logind.delay_usec.clone(),
        held: logind.held.clone(),
        inhibits: logind.inhibits.clone(),
    };
    let login = zbus::connection::Builder::address(address)
        .unwrap()
        .name("org.freedesktop.login1")
        .unwrap()
        .serve_at("/org/freedesktop/login1", served)
        .unwrap()
        .build()
        .await
        .unwrap();
    let systemd = zbus::connection::Builder::address(address)
        .unwrap()
        .name("org.freedesktop.systemd1")
        .unwrap()
        .serve_at(
            "/org/freedesktop/systemd1",
            Systemd {
                conf: conf.clone(),
                delay_usec: logind.delay_usec.clone(),
                stubborn,
            },
        )
        .unwrap()
        .build()
        .await
        .unwrap();
    Host {
        login,
        _systemd: systemd,
        logind,
        conf,
        _dir: dir,
    }
}

async fn prepare_for_shutdown(h: &Host, active: bool) {
    h.login
        .emit_signal(
            None::<()>,
            "/org/freedesktop/login1",
            "org.freedesktop.login1.Manager",
            "PrepareForShutdown",
            &(active,),
        )
        .await
        .unwrap();
}

/// Whether the far end of the `i`th lock sees it closed.
fn released(h: &Host, i: usize) -> bool {
    let held = h.logind.held.lock().unwrap();
    let mut s = held[i].try_clone().unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    matches!(s.read(&mut [0u8; 1]), Ok(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raises_the_delay_holds_the_lock_and_follows_the_signal() {
    let bus = daemon();
    let h = host(&bus.address, 5, false).await;
    let inhibitor = LogindInhibitor::new(&bus.address, Duration::from_secs(2), h.conf.clone());

    inhibitor.start(Duration::from_secs(30)).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(h.conf.join(LOGIND_CONF_FILE)).unwrap(),
        "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=30\n"
    );
    assert_eq!(
        h.logind.inhibits.lock().unwrap()[0],
        (
            "shutdown".to_string(),
            "kubelet".to_string(),
            "Kubelet needs time to handle node shutdown".to_string(),
            "delay".to_string()
        )
    );
    assert!(!released(&h, 0), "the lock is held");

    prepare_for_shutdown(&h, true).await;
    assert_eq!(inhibitor.next_event().await, Some(true));
    inhibitor.release().await.unwrap();
    assert!(
        released(&h, 0),
        "closing the descriptor releases logind's lock"
    );

    prepare_for_shutdown(&h, false).await;
    assert_eq!(inhibitor.next_event().await, Some(false));
    inhibitor.acquire().await.unwrap();
    assert_eq!(h.logind.inhibits.lock().unwrap().len(), 2);
    assert!(!released(&h, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_logind_does_not_take_is_gos_error() {
    let bus = daemon();
    let h = host(&bus.address, 5, true).await;
    let inhibitor = LogindInhibitor::new(&bus.address, Duration::from_secs(2), h.conf.clone());
    let err = inhibitor.start(Duration::from_secs(30)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node shutdown manager was unable to update logind InhibitDelayMaxSec to 30s (ShutdownGracePeriod), current value of InhibitDelayMaxSec (5s) is less than requested ShutdownGracePeriod"
    );
    assert!(
        h.logind.inhibits.lock().unwrap().is_empty(),
        "no lock taken"
    );
    drop(h);

    // A delay already long enough is left alone.
    let h = host(&bus.address, 60, true).await;
    let inhibitor = LogindInhibitor::new(&bus.address, Duration::from_secs(2), h.conf.clone());
    inhibitor.start(Duration::from_secs(30)).await.unwrap();
    assert!(!h.conf.join(LOGIND_CONF_FILE).exists());
}

#[tokio::test]
async fn no_bus_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let address = format!("unix:path={}", dir.path().join("none").display());
    let inhibitor = LogindInhibitor::new(&address, Duration::from_secs(1), dir.path().into());
    let err = inhibitor.start(Duration::from_secs(30)).await.unwrap_err();
    assert!(matches!(err, ShutdownError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains(&address), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_bus_is_joined_again_and_the_lock_taken_anew() {
    let dir = tempfile::tempdir().unwrap();
    let bus = daemon_at(dir.path());
    let h = host(&bus.address, 60, true).await;
    // The bus's path alone, as the system bus address is: the daemon's own address names its
    // GUID, which a restarted daemon does not keep.
    let address = format!("unix:path={}", dir.path().join("bus").display());
    let inhibitor = Arc::new(LogindInhibitor::new(
        &address,
        Duration::from_secs(2),
        h.conf.clone(),
    ));
    inhibitor.start(Duration::from_secs(30)).await.unwrap();
    let waiting = {
        let i = inhibitor.clone();
        tokio::spawn(async move { i.next_event().await })
    };
    // D-Bus restarts: the old bus and its logind are gone, a new one comes up at the address.
    drop(h);
    drop(bus);
    let bus = daemon_at(dir.path());
    let h = host(&bus.address, 60, true).await;
    for _ in 0..100 {
        if !h.logind.inhibits.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        h.logind.inhibits.lock().unwrap().len(),
        1,
        "the lock taken anew"
    );
    prepare_for_shutdown(&h, true).await;
    let event = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the signal arrives on the new bus")
        .unwrap();
    assert_eq!(event, Some(true));
}
