//! The node's address when `--node-ip` is not given, in Go's order (`nodestatus.NodeAddress`):
//! the node name if it is an IP, else the addresses the name resolves to (not loopback), else
//! the address of the interface that carries the default route (Go's
//! `utilnet.ChooseHostInterface`), which is what a node whose name no resolver knows
//! registers with.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The longest `/proc/net/route` read (a routing table of some thousand entries).
const MAX_ROUTE_TABLE_BYTES: usize = 1 << 20;

/// The interfaces of `/proc/net/route`'s IPv4 default routes that are up, lowest metric first.
pub fn default_route_interfaces(route_table: &str) -> Vec<String> {
    const RTF_UP: u32 = 0x1;
    let mut found: Vec<(u32, String)> = route_table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
            let (iface, dest, flags, metric, mask) =
                (f.first()?, f.get(1)?, f.get(3)?, f.get(6)?, f.get(7)?);
            let flags = u32::from_str_radix(flags, 16).ok()?;
            (*dest == "00000000" && *mask == "00000000" && flags & RTF_UP != 0)
                .then(|| Some((metric.parse().ok()?, iface.to_string())))?
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, iface)| iface).collect()
}

/// The address the kernel would send from on the default route: a UDP socket "connected" to
/// a documentation address (TEST-NET-1; nothing is sent) learns its source address.
pub async fn default_route_address() -> Option<IpAddr> {
    let table = match tokio::fs::read("/proc/net/route").await {
        Ok(bytes) if bytes.len() <= MAX_ROUTE_TABLE_BYTES => {
            String::from_utf8_lossy(&bytes).into_owned()
        }
        _ => return None,
    };
    if default_route_interfaces(&table).is_empty() {
        return None;
    }
    let socket = tokio::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .await
        .ok()?;
    socket
        .connect(SocketAddr::from((Ipv4Addr::new(192, 0, 2, 1), 9)))
        .await
        .ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth1\t00000000\t0101A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n\
        eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
        eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
        down0\t00000000\t00000000\t0000\t0\t0\t0\t00000000\t0\t0\t0\n\
        broken line\n";

    #[test]
    fn default_routes_that_are_up_by_metric() {
        assert_eq!(default_route_interfaces(TABLE), vec!["eth0", "eth1"]);
        assert!(default_route_interfaces("Iface\tDestination\n").is_empty());
        assert!(default_route_interfaces("").is_empty());
    }
}
