//! Serving gRPC on a unix socket to clients that send the socket's path as HTTP/2's
//! `:authority`.
//!
//! grpc-go before 1.3x, dialling a socket path (as the Go kubelet's own device plugin stub
//! does, and the plugins built on it: the upstream sample device plugin, many GPU and NIC
//! plugins), sends that path as the request's `:authority`. h2, tonic's HTTP/2, refuses such
//! a request as malformed (`PROTOCOL_ERROR`; hyperium/h2#487), where the Go kubelet's server
//! accepts it. So every connection a unix-socket server of the kubelet accepts is relayed
//! through an [`AuthorityRewriter`]: the client's header blocks are decoded (HPACK, with the
//! client's dynamic table tracked), an `:authority` that is not a valid authority becomes
//! `localhost` (what newer grpc-go sends on unix sockets), and every block is encoded again
//! for the server with an encoder of the relay's own (so the server's table follows the
//! relay's, never the client's). Every other frame, and the whole server → client direction,
//! passes unchanged.
//!
//! # The relay of one connection
//! | state | left when |
//! |---|---|
//! | **preface** (24 bytes, passed through) | read → **frames** |
//! | **frames**: each frame header read; a `HEADERS` frame and its `CONTINUATION`s collected, rewritten and written as one block; any other frame passed through | the client closes → both directions end; a frame over [`MAX_FRAME`], a header block over [`MAX_HEADER_BLOCK`] or one that does not decode → the connection is closed (the server would refuse it as well) |
//!
//! The relay's tasks end with the connection or the server's shutdown token.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use loona_hpack::{Decoder, Encoder};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The HTTP/2 connection preface.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The largest frame relayed (h2's default `SETTINGS_MAX_FRAME_SIZE` is 16 KiB; a client
/// may only send more after the server allowed it, which tonic does not).
pub const MAX_FRAME: usize = 1 << 20;
/// The largest header block collected.
pub const MAX_HEADER_BLOCK: usize = 1 << 20;
/// The header table size h2 advertises (and its decoder keeps): the relay's encoder and its
/// decoder of the client use the same.
const HEADER_TABLE_SIZE: usize = 4096;
/// The largest frame payload the relay writes (h2's default maximum frame size).
const OUT_FRAME: usize = 16_384;
/// Buffer of the in-memory pipe between the relay and the server.
const PIPE_BUFFER: usize = 64 * 1024;

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// Accepts connections on `listener` and hands the server one in-memory stream per
/// connection, its client → server bytes going through an [`AuthorityRewriter`]. The
/// relays run on `tasks` and end at `shutdown`.
pub fn incoming(
    listener: UnixListener,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) -> impl Stream<Item = io::Result<DuplexStream>> + Send + 'static {
    let (tx, rx) = mpsc::channel(16);
    let accept_tasks = tasks.clone();
    tasks.spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => return,
                a = listener.accept() => a,
            };
            let item = match accepted {
                Ok((client, _)) => {
                    let (server_side, relay_side) = tokio::io::duplex(PIPE_BUFFER);
                    accept_tasks.spawn(relay(client, relay_side, shutdown.clone()));
                    Ok(server_side)
                }
                Err(e) => Err(e),
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                sent = tx.send(item) => if sent.is_err() { return },
            }
        }
    });
    Incoming(rx)
}

struct Incoming(mpsc::Receiver<io::Result<DuplexStream>>);

impl Stream for Incoming {
    type Item = io::Result<DuplexStream>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// Relays one connection until either side closes or `shutdown`.
async fn relay(client: tokio::net::UnixStream, server: DuplexStream, shutdown: CancellationToken) {
    let (client_read, mut client_write) = client.into_split();
    let (server_read, mut server_write) = tokio::io::split(server);
    let up = async {
        let mut rewriter = AuthorityRewriter::new();
        if let Err(e) = rewriter.relay(client_read, &mut server_write).await {
            tracing::debug!(error = %e, "unix-socket gRPC relay: client stream ended");
        }
        let _ = server_write.shutdown().await;
    };
    let down = async {
        let mut server_read = server_read;
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = async { tokio::join!(up, down) } => {}
    }
}

/// The client → server half of a relay: see the module docs.
pub struct AuthorityRewriter {
    decoder: Decoder<'static>,
    encoder: Encoder<'static>,
}

impl Default for AuthorityRewriter {
    fn default() -> Self {
        Self::new()
    }
}

impl AuthorityRewriter {
    /// A rewriter for a new connection.
    pub fn new() -> AuthorityRewriter {
        let mut decoder = Decoder::new();
        decoder.set_max_allowed_table_size(HEADER_TABLE_SIZE);
        let mut encoder = Encoder::new();
        encoder.set_max_table_size(HEADER_TABLE_SIZE);
        AuthorityRewriter { decoder, encoder }
    }

    /// Copies `from` to `to`, rewriting header blocks, until `from` ends (`Ok`) or a frame
    /// cannot be relayed (`Err`).
    pub async fn relay<R, W>(&mut self, mut from: R, to: &mut W) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut preface = [0u8; 24];
        from.read_exact(&mut preface).await?;
        to.write_all(&preface).await?;
        if &preface != PREFACE {
            // Not HTTP/2 with prior knowledge: pass the rest through for the server to refuse.
            tokio::io::copy(&mut from, to).await?;
            return Ok(());
        }
        loop {
            let Some((len, kind, flags, stream)) = read_frame_header(&mut from).await? else {
                return Ok(());
            };
            let mut payload = vec![0u8; len];
            from.read_exact(&mut payload).await?;
            if kind != HEADERS {
                to.write_all(&frame_header(len, kind, flags, stream))
                    .await?;
                to.write_all(&payload).await?;
                to.flush().await?;
                continue;
            }
            let (priority, mut block) = headers_fragment(flags, &payload)?;
            let mut end_headers = flags & END_HEADERS != 0;
            while !end_headers {
                let Some((len, kind, cflags, cstream)) = read_frame_header(&mut from).await? else {
                    return Err(invalid("the connection ended inside a header block"));
                };
                if kind != CONTINUATION || cstream != stream {
                    return Err(invalid("a header block not followed by its CONTINUATION"));
                }
                if block.len() + len > MAX_HEADER_BLOCK {
                    return Err(invalid("a header block over the relay's bound"));
                }
                let start = block.len();
                block.resize(start + len, 0);
                from.read_exact(&mut block[start..]).await?;
                end_headers = cflags & END_HEADERS != 0;
            }
            let out = self.rewrite_block(&block)?;
            write_headers(to, stream, flags & END_STREAM, priority, &out).await?;
            to.flush().await?;
        }
    }

    /// Decodes a header block, replaces an invalid `:authority` with `localhost`, and
    /// encodes it again.
    pub fn rewrite_block(&mut self, block: &[u8]) -> io::Result<Vec<u8>> {
        let mut headers = self
            .decoder
            .decode(block)
            .map_err(|e| invalid(&format!("a header block that does not decode: {e:?}")))?;
        for (name, value) in &mut headers {
            if name.as_slice() == b":authority"
                && http::uri::Authority::try_from(value.as_slice()).is_err()
            {
                *value = b"localhost".to_vec();
            }
        }
        let mut out = Vec::with_capacity(block.len());
        self.encoder
            .encode_into(
                headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())),
                &mut out,
            )
            .map_err(|e| invalid(&format!("encoding a header block: {e}")))?;
        Ok(out)
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// The next frame's header, `None` at a clean end of the stream.
async fn read_frame_header<R: AsyncRead + Unpin>(
    from: &mut R,
) -> io::Result<Option<(usize, u8, u8, u32)>> {
    let mut h = [0u8; 9];
    let mut got = 0;
    while got < h.len() {
        let n = from.read(&mut h[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(invalid("the connection ended inside a frame header"))
            };
        }
        got += n;
    }
    let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
    if len > MAX_FRAME {
        return Err(invalid("a frame over the relay's bound"));
    }
    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    Ok(Some((len, h[3], h[4], stream)))
}

fn frame_header(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; 9] {
    let l = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    let s = stream.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// A HEADERS payload's priority fields (when flagged) and header block fragment, its
/// padding removed.
fn headers_fragment(flags: u8, payload: &[u8]) -> io::Result<(Option<[u8; 5]>, Vec<u8>)> {
    let mut body = payload;
    let mut pad = 0;
    if flags & PADDED != 0 {
        let (&p, rest) = body
            .split_first()
            .ok_or_else(|| invalid("a padded HEADERS frame without its pad length"))?;
        pad = usize::from(p);
        body = rest;
    }
    let mut priority = None;
    if flags & PRIORITY != 0 {
        let (p, rest) = body
            .split_at_checked(5)
            .ok_or_else(|| invalid("a HEADERS frame too short for its priority"))?;
        let mut fields = [0u8; 5];
        fields.copy_from_slice(p);
        priority = Some(fields);
        body = rest;
    }
    let end = body
        .len()
        .checked_sub(pad)
        .ok_or_else(|| invalid("a HEADERS frame's padding longer than the frame"))?;
    Ok((priority, body[..end].to_vec()))
}

/// Writes a header block as a HEADERS frame and as many CONTINUATIONs as it needs.
async fn write_headers<W: AsyncWrite + Unpin>(
    to: &mut W,
    stream: u32,
    end_stream: u8,
    priority: Option<[u8; 5]>,
    block: &[u8],
) -> io::Result<()> {
    let room = OUT_FRAME - priority.map_or(0, |p| p.len());
    let (first, mut rest) = block.split_at(block.len().min(room));
    let mut flags = end_stream | if rest.is_empty() { END_HEADERS } else { 0 };
    let mut payload = Vec::with_capacity(first.len() + 5);
    if let Some(p) = priority {
        flags |= PRIORITY;
        payload.extend_from_slice(&p);
    }
    payload.extend_from_slice(first);
    to.write_all(&frame_header(payload.len(), HEADERS, flags, stream))
        .await?;
    to.write_all(&payload).await?;
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(rest.len().min(OUT_FRAME));
        let flags = if tail.is_empty() { END_HEADERS } else { 0 };
        to.write_all(&frame_header(chunk.len(), CONTINUATION, flags, stream))
            .await?;
        to.write_all(chunk).await?;
        rest = tail;
    }
    Ok(())
}

#[cfg(test)]
#[path = "grpc_uds_tests.rs"]
mod tests;
