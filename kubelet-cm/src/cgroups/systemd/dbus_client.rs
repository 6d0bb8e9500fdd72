//! [`SystemdBus`] over the system bus with zbus: method calls with a timeout, `JobRemoved`
//! waited for with the same limit, one connection kept and made again after a failure.

use std::pin::pin;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::{select, Either};
use futures::StreamExt;
use zbus::zvariant::{OwnedObjectPath, Value};
use zbus::{Connection, MatchRule, MessageStream};

use super::bus::{BusError, SystemdBus};
use super::properties::{PropertyValue, UnitProperty};

const DESTINATION: &str = "org.freedesktop.systemd1";
const PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";

/// The system bus address the Go kubelet's D-Bus library uses by default.
pub const SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";

/// systemd's manager on a D-Bus bus.
#[derive(Debug)]
pub struct DbusSystemd {
    address: String,
    timeout: Duration,
    conn: Mutex<Option<Connection>>,
}

impl DbusSystemd {
    /// Connects to `address` (normally [`SYSTEM_BUS`]; `DBUS_SYSTEM_BUS_ADDRESS` overrides it as
    /// for any D-Bus client) and subscribes to the manager's signals. Every call, and every
    /// job it waits for, is bounded by `timeout`.
    pub fn connect(address: &str, timeout: Duration) -> Result<DbusSystemd, BusError> {
        let bus = DbusSystemd {
            address: address.to_string(),
            timeout,
            conn: Mutex::new(None),
        };
        let _subscribed = bus.connection()?;
        Ok(bus)
    }

    /// The address from `DBUS_SYSTEM_BUS_ADDRESS`, else [`SYSTEM_BUS`].
    pub fn system_bus_address() -> String {
        std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
            .ok()
            .filter(|a| !a.trim().is_empty())
            .unwrap_or_else(|| SYSTEM_BUS.to_string())
    }

    fn connect_error(&self, message: String) -> BusError {
        BusError::Connect {
            address: self.address.clone(),
            message,
        }
    }

    /// The live connection, made (and subscribed) if there is none.
    fn connection(&self) -> Result<Connection, BusError> {
        let mut slot = self
            .conn
            .lock()
            .map_err(|_| self.connect_error("connection lock poisoned".into()))?;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let timeout = self.timeout;
        let address = self.address.clone();
        let conn = self.bounded("Subscribe", "", async move {
            let conn = zbus::connection::Builder::address(address.as_str())?
                .method_timeout(timeout)
                .build()
                .await?;
            // systemd sends JobRemoved only to subscribed clients.
            conn.call_method(Some(DESTINATION), PATH, Some(MANAGER), "Subscribe", &())
                .await?;
            Ok::<_, zbus::Error>(conn)
        });
        let conn = match conn {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(self.connect_error(e.to_string())),
            Err(e) => return Err(e),
        };
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Drops the connection after an I/O failure so the next call makes a new one.
    fn forget_on_io_error(&self, e: &zbus::Error) {
        if matches!(e, zbus::Error::InputOutput(_)) {
            if let Ok(mut slot) = self.conn.lock() {
                *slot = None;
            }
        }
    }

    /// Runs `fut` on zbus' executor, giving up after the timeout.
    fn bounded<T>(
        &self,
        method: &'static str,
        unit: &str,
        fut: impl std::future::Future<Output = T>,
    ) -> Result<T, BusError> {
        let timeout = self.timeout;
        zbus::block_on(async move {
            match select(pin!(fut), pin!(async_io::Timer::after(timeout))).await {
                Either::Left((v, _)) => Ok(v),
                Either::Right(_) => Err(BusError::Timeout {
                    method,
                    unit: unit.to_string(),
                    seconds: timeout.as_secs(),
                }),
            }
        })
    }

    fn call_error(&self, method: &'static str, unit: &str, e: zbus::Error) -> BusError {
        self.forget_on_io_error(&e);
        match e {
            zbus::Error::MethodError(name, detail, _) => BusError::Call {
                method,
                unit: unit.to_string(),
                name: name.to_string(),
                message: detail.unwrap_or_default(),
            },
            zbus::Error::InputOutput(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                BusError::Timeout {
                    method,
                    unit: unit.to_string(),
                    seconds: self.timeout.as_secs(),
                }
            }
            other => BusError::Call {
                method,
                unit: unit.to_string(),
                name: "zbus".into(),
                message: other.to_string(),
            },
        }
    }

    /// Calls `method` (which queues a job) and waits for the job's `JobRemoved`.
    fn call_and_wait_job<B>(
        &self,
        method: &'static str,
        unit: &str,
        body: &B,
    ) -> Result<(), BusError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        let conn = self.connection()?;
        let rule = MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(DESTINATION)
            .and_then(|b| b.interface(MANAGER))
            .and_then(|b| b.member("JobRemoved"))
            .map_err(|e| self.call_error(method, unit, e))?
            .build();
        let outcome = self.bounded(method, unit, async {
            // Listening before the call, so the signal cannot be missed.
            let mut jobs = MessageStream::for_match_rule(rule, &conn, Some(256)).await?;
            let reply = conn
                .call_method(Some(DESTINATION), PATH, Some(MANAGER), method, body)
                .await?;
            let job: OwnedObjectPath = reply.body().deserialize()?;
            while let Some(msg) = jobs.next().await {
                let msg = msg?;
                let Ok((_id, path, _unit, result)) =
                    msg.body()
                        .deserialize::<(u32, OwnedObjectPath, String, String)>()
                else {
                    continue;
                };
                if path == job {
                    return Ok(Some(result));
                }
            }
            Ok::<_, zbus::Error>(None)
        })?;
        match outcome {
            Ok(Some(result)) if result == "done" => Ok(()),
            Ok(Some(result)) => Err(BusError::Job {
                unit: unit.to_string(),
                result,
            }),
            Ok(None) => Err(self.call_error(
                method,
                unit,
                zbus::Error::InputOutput(std::sync::Arc::new(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the bus closed before the job finished",
                ))),
            )),
            Err(e) => Err(self.call_error(method, unit, e)),
        }
    }
}

fn to_value(v: &PropertyValue) -> Value<'static> {
    match v {
        PropertyValue::Bool(b) => Value::from(*b),
        PropertyValue::U64(n) => Value::from(*n),
        PropertyValue::Str(s) => Value::from(s.clone()),
        PropertyValue::Strs(v) => Value::from(v.clone()),
        PropertyValue::U32s(v) => Value::from(v.clone()),
        PropertyValue::StrPairs(v) => Value::from(v.clone()),
    }
}

fn to_wire(properties: &[UnitProperty]) -> Vec<(&'static str, Value<'static>)> {
    properties
        .iter()
        .map(|p| (p.name, to_value(&p.value)))
        .collect()
}

impl SystemdBus for DbusSystemd {
    fn version(&self) -> Result<String, BusError> {
        let conn = self.connection()?;
        let reply = self
            .bounded("Get", "Version", async {
                let reply = conn
                    .call_method(
                        Some(DESTINATION),
                        PATH,
                        Some("org.freedesktop.DBus.Properties"),
                        "Get",
                        &(MANAGER, "Version"),
                    )
                    .await?;
                let value: zbus::zvariant::OwnedValue = reply.body().deserialize()?;
                Ok::<_, zbus::Error>(String::try_from(value).unwrap_or_default())
            })?
            .map_err(|e| self.call_error("Get", "Version", e))?;
        Ok(reply)
    }

    fn start_transient_unit(
        &self,
        unit: &str,
        properties: &[UnitProperty],
    ) -> Result<(), BusError> {
        let aux: Vec<(&str, Vec<(&str, Value<'_>)>)> = Vec::new();
        self.call_and_wait_job(
            "StartTransientUnit",
            unit,
            &(unit, "replace", to_wire(properties), aux),
        )
    }

    fn set_unit_properties(&self, unit: &str, properties: &[UnitProperty]) -> Result<(), BusError> {
        let conn = self.connection()?;
        let body = (unit, true, to_wire(properties));
        self.bounded("SetUnitProperties", unit, async {
            conn.call_method(
                Some(DESTINATION),
                PATH,
                Some(MANAGER),
                "SetUnitProperties",
                &body,
            )
            .await
            .map(|_| ())
        })?
        .map_err(|e| self.call_error("SetUnitProperties", unit, e))
    }

    fn stop_unit(&self, unit: &str) -> Result<(), BusError> {
        self.call_and_wait_job("StopUnit", unit, &(unit, "replace"))
    }

    fn reset_failed_unit(&self, unit: &str) -> Result<(), BusError> {
        let conn = self.connection()?;
        self.bounded("ResetFailedUnit", unit, async {
            conn.call_method(
                Some(DESTINATION),
                PATH,
                Some(MANAGER),
                "ResetFailedUnit",
                &(unit,),
            )
            .await
            .map(|_| ())
        })?
        .map_err(|e| self.call_error("ResetFailedUnit", unit, e))
    }
}
