//! Clients built on gRPC's C core (Python's grpcio from 1.57, C++, Ruby) and grpc-java send a
//! Unix socket's path, raw or percent-encoded, as HTTP/2's `:authority`. The daemon's HTTP/2
//! stack (h2) refuses such a request as malformed (`RST_STREAM` with `PROTOCOL_ERROR`) before
//! any service sees it, so those clients could not call the daemon at all on its socket.
//!
//! [`AuthorityFix`] sits between an accepted Unix connection and the server and reads what the
//! client sends. At the connection's first header block it decides, once:
//!
//! - the `:authority` is one h2 accepts (grpc-go's and tonic's `localhost`), or absent: every
//!   byte of the connection is passed on untouched from then on;
//! - it is not: each header block of the connection is decoded (HPACK) and encoded again with
//!   `localhost` in its place. The new encoding starts from an empty dynamic table, which is
//!   the server's state at that first block, so the two stay in step.
//!
//! Everything else (frames other than header blocks, and all the server sends) passes as it is.
//! A header block that cannot be decoded is passed on as it came while undecided (h2 then
//! answers it as it would have), and ends a rewritten connection.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

// prost re-exports the bytes crate tonic and h2 use.
use prost::bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// The client's connection preface (RFC 9113 §3.4).
const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The frame size every HTTP/2 peer accepts (SETTINGS_MAX_FRAME_SIZE's floor).
const MAX_FRAME: usize = 16_384;
/// A header block larger than this is not decoded here (h2 enforces its own limit on it).
const MAX_BLOCK: usize = 1 << 20;
/// What a refused authority is replaced with: what grpc-go and tonic send on a Unix socket.
const LOCALHOST: &[u8] = b"localhost";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Preface,
    /// Before the first header block.
    Undecided,
    /// The client's authority is fine: bytes are copied from here on.
    Passthrough,
    /// Every header block is re-encoded with `localhost` as its authority.
    Rewrite,
}

/// A header block being gathered: its frames as they came, its fragment, and what its first
/// frame said.
#[derive(Default)]
struct Block {
    raw: Vec<u8>,
    fragment: Vec<u8>,
    stream: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
}

/// A Unix connection whose header blocks carry an authority h2 accepts; see the module docs.
pub struct AuthorityFix<S> {
    inner: S,
    mode: Mode,
    /// Bytes read from the client, not yet looked at.
    input: BytesMut,
    /// Bytes ready for the server.
    output: BytesMut,
    block: Option<Block>,
    decoder: loona_hpack::Decoder<'static>,
    encoder: loona_hpack::Encoder<'static>,
    eof: bool,
}

impl<S> AuthorityFix<S> {
    pub fn new(inner: S) -> AuthorityFix<S> {
        AuthorityFix {
            inner,
            mode: Mode::Preface,
            input: BytesMut::new(),
            output: BytesMut::new(),
            block: None,
            decoder: loona_hpack::Decoder::new(),
            encoder: loona_hpack::Encoder::new(),
            eof: false,
        }
    }

    /// Moves what can be decided from `input` to `output`.
    fn process(&mut self) -> io::Result<()> {
        loop {
            match self.mode {
                Mode::Passthrough => {
                    let all = self.input.split();
                    self.output.extend_from_slice(&all);
                    return Ok(());
                }
                Mode::Preface => {
                    if self.input.len() < PREFACE_LEN {
                        return Ok(());
                    }
                    let preface = self.input.split_to(PREFACE_LEN);
                    self.output.extend_from_slice(&preface);
                    self.mode = Mode::Undecided;
                }
                Mode::Undecided | Mode::Rewrite => {
                    if self.input.len() < FRAME_HEADER_LEN {
                        return Ok(());
                    }
                    let len =
                        usize::from(self.input[0]) << 16 | usize::from(self.input[1]) << 8 | usize::from(self.input[2]);
                    if self.input.len() < FRAME_HEADER_LEN + len {
                        return Ok(());
                    }
                    let frame = self.input.split_to(FRAME_HEADER_LEN + len);
                    self.frame(&frame)?;
                }
            }
        }
    }

    fn frame(&mut self, frame: &[u8]) -> io::Result<()> {
        let (kind, flags) = (frame[3], frame[4]);
        let stream = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
        let payload = &frame[FRAME_HEADER_LEN..];
        match (kind, self.block.is_some()) {
            (HEADERS, false) => {
                let Some((fragment, priority)) = headers_fragment(flags, payload) else {
                    return self.give_up(frame, "a HEADERS frame whose padding or priority does not fit it");
                };
                let block = Block {
                    raw: frame.to_vec(),
                    fragment: fragment.to_vec(),
                    stream,
                    end_stream: flags & END_STREAM != 0,
                    priority,
                };
                self.block = Some(block);
            }
            (CONTINUATION, true) => {
                let block = self.block.as_mut().expect("checked above");
                block.raw.extend_from_slice(frame);
                block.fragment.extend_from_slice(payload);
            }
            (_, false) => {
                self.output.extend_from_slice(frame);
                return Ok(());
            }
            (_, true) => return self.give_up(frame, "a header block interrupted by another frame"),
        }
        let block_len = self.block.as_ref().map_or(0, |b| b.raw.len());
        if block_len > MAX_BLOCK {
            let raw = self.block.take().map(|b| b.raw).unwrap_or_default();
            return self.give_up(&raw, "a header block larger than this adapter decodes");
        }
        if flags & END_HEADERS != 0 {
            let block = self.block.take().expect("gathered above");
            self.block(block)?;
        }
        Ok(())
    }

    /// A complete header block: decided on, passed on or rewritten.
    fn block(&mut self, block: Block) -> io::Result<()> {
        let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let decoded = self.decoder.decode_with_cb(&block.fragment, |name, value| {
            headers.push((name.into_owned(), value.into_owned()));
        });
        if decoded.is_err() {
            return self.give_up(&block.raw, "a header block that does not decode");
        }
        let refused = |value: &[u8]| tonic::codegen::http::uri::Authority::try_from(value).is_err();
        let bad = headers.iter().any(|(name, value)| name == b":authority" && refused(value));
        if self.mode == Mode::Undecided {
            if !bad {
                self.output.extend_from_slice(&block.raw);
                self.mode = Mode::Passthrough;
                return Ok(());
            }
            let authority = headers.iter().find(|(n, _)| n == b":authority").map(|(_, v)| v.clone());
            tracing::info!(
                authority = %String::from_utf8_lossy(&authority.unwrap_or_default()),
                "a client sent the socket's path as its HTTP/2 authority (gRPC's C core does): its requests are \
                 read as for localhost"
            );
            self.mode = Mode::Rewrite;
        }
        for (name, value) in headers.iter_mut() {
            if name == b":authority" && refused(value) {
                *value = LOCALHOST.to_vec();
            }
        }
        let encoded = self.encoder.encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        self.write_block(&block, &encoded);
        Ok(())
    }

    /// `encoded` as one HEADERS frame and as many CONTINUATION frames as it needs.
    fn write_block(&mut self, block: &Block, encoded: &[u8]) {
        let mut flags = if block.end_stream { END_STREAM } else { 0 };
        let mut first = Vec::new();
        if let Some(priority) = block.priority {
            flags |= PRIORITY;
            first.extend_from_slice(&priority);
        }
        let room = MAX_FRAME - first.len();
        let (head, mut rest) = encoded.split_at(encoded.len().min(room));
        first.extend_from_slice(head);
        if rest.is_empty() {
            flags |= END_HEADERS;
        }
        self.put_frame(HEADERS, flags, block.stream, &first);
        while !rest.is_empty() {
            let (chunk, after) = rest.split_at(rest.len().min(MAX_FRAME));
            rest = after;
            self.put_frame(CONTINUATION, if rest.is_empty() { END_HEADERS } else { 0 }, block.stream, chunk);
        }
    }

    fn put_frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let len = payload.len() as u32;
        self.output.extend_from_slice(&len.to_be_bytes()[1..]);
        self.output.extend_from_slice(&[kind, flags]);
        self.output.extend_from_slice(&stream.to_be_bytes());
        self.output.extend_from_slice(payload);
    }

    /// Something this adapter does not read: before the decision, the bytes go on as they came
    /// and the connection is the server's to judge; after a rewrite began, the server's view of
    /// the header table can no longer be kept, so the connection ends.
    fn give_up(&mut self, raw: &[u8], why: &str) -> io::Result<()> {
        if self.mode == Mode::Rewrite {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("ending the connection: {why}")));
        }
        self.output.extend_from_slice(raw);
        self.mode = Mode::Passthrough;
        Ok(())
    }
}

/// A HEADERS frame's header block fragment, and its priority fields if it has them.
fn headers_fragment(flags: u8, payload: &[u8]) -> Option<(&[u8], Option<[u8; 5]>)> {
    let mut body = payload;
    let mut pad = 0;
    if flags & PADDED != 0 {
        pad = usize::from(*body.first()?);
        body = &body[1..];
    }
    let mut priority = None;
    if flags & PRIORITY != 0 {
        priority = Some(<[u8; 5]>::try_from(body.get(..5)?).ok()?);
        body = &body[5..];
    }
    let end = body.len().checked_sub(pad)?;
    Some((&body[..end], priority))
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.output.is_empty() {
                let n = this.output.len().min(buf.remaining());
                buf.put_slice(&this.output[..n]);
                this.output.advance(n);
                return Poll::Ready(Ok(()));
            }
            if this.mode == Mode::Passthrough && this.input.is_empty() {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            if this.eof {
                // What never made a whole frame goes on as it is; the server judges it.
                let rest = this.input.split();
                this.output.extend_from_slice(&rest);
                if this.output.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            let mut chunk = [0u8; 16_384];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                this.eof = true;
            } else {
                this.input.extend_from_slice(read.filled());
            }
            this.process()?;
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<S: Connected> Connected for AuthorityFix<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// The connections of `listener`, each behind an [`AuthorityFix`].
pub fn incoming(
    listener: tokio::net::UnixListener,
) -> impl tokio_stream::Stream<Item = io::Result<AuthorityFix<tokio::net::UnixStream>>> {
    use tokio_stream::StreamExt as _;
    tokio_stream::wrappers::UnixListenerStream::new(listener).map(|connection| connection.map(AuthorityFix::new))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// Runs `bytes` through the adapter in pieces of `step`; what the server would read.
    fn through(bytes: &[u8], step: usize) -> Vec<u8> {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut client, server) = tokio::io::duplex(1 << 20);
            for piece in bytes.chunks(step) {
                client.write_all(piece).await.unwrap();
            }
            drop(client);
            let mut fixed = AuthorityFix::new(server);
            let mut out = Vec::new();
            fixed.read_to_end(&mut out).await.unwrap();
            out
        })
    }

    fn request(encoder: &mut loona_hpack::Encoder<'static>, authority: &[u8], stream: u32) -> Vec<u8> {
        let headers: [(&[u8], &[u8]); 5] = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", b"/cuzk.v1.ProvingEngine/GetStatus"),
            (b":authority", authority),
            (b"content-type", b"application/grpc"),
        ];
        frame(HEADERS, END_HEADERS, stream, &encoder.encode(headers))
    }

    /// The headers the server decodes from what the adapter passed on, per block.
    fn server_view(bytes: &[u8]) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
        assert_eq!(&bytes[..PREFACE_LEN], PREFACE);
        let mut decoder = loona_hpack::Decoder::new();
        let mut rest = &bytes[PREFACE_LEN..];
        let mut blocks = Vec::new();
        while !rest.is_empty() {
            let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
            let (this, after) = rest.split_at(FRAME_HEADER_LEN + len);
            if this[3] == HEADERS {
                blocks.push(decoder.decode(&this[FRAME_HEADER_LEN..]).unwrap());
            }
            rest = after;
        }
        blocks
    }

    fn authority_of(block: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        block.iter().find(|(n, _)| n == b":authority").unwrap().1.clone()
    }

    #[test]
    fn a_socket_path_authority_is_read_as_localhost_on_every_request_of_the_connection() {
        let mut encoder = loona_hpack::Encoder::new();
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(0x4, 0, 0, &[]));
        // The second request refers to the first's dynamic-table entries.
        bytes.extend(request(&mut encoder, b"%2Ftmp%2Fsnarkpipe.sock", 1));
        bytes.extend(frame(0x0, END_STREAM, 1, &[0, 0, 0, 0, 0]));
        bytes.extend(request(&mut encoder, b"%2Ftmp%2Fsnarkpipe.sock", 3));
        for step in [1, 7, bytes.len()] {
            let blocks = server_view(&through(&bytes, step));
            assert_eq!(blocks.len(), 2);
            for block in &blocks {
                assert_eq!(authority_of(block), b"localhost");
                assert!(block.iter().any(|(n, v)| n == b":path" && v == b"/cuzk.v1.ProvingEngine/GetStatus"));
            }
        }
    }

    #[test]
    fn a_valid_authority_passes_byte_for_byte() {
        let mut encoder = loona_hpack::Encoder::new();
        let mut bytes = PREFACE.to_vec();
        bytes.extend(request(&mut encoder, b"localhost", 1));
        bytes.extend(request(&mut encoder, b"localhost", 3));
        bytes.extend(frame(0x0, END_STREAM, 3, &[0, 0, 0, 0, 0]));
        assert_eq!(through(&bytes, 5), bytes);
        // Undecodable HPACK before any decision is the server's to refuse, unchanged.
        let mut garbled = PREFACE.to_vec();
        garbled.extend(frame(HEADERS, END_HEADERS, 1, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]));
        assert_eq!(through(&garbled, 3), garbled);
    }

    #[test]
    fn a_long_rewritten_block_is_split_into_continuations() {
        let mut encoder = loona_hpack::Encoder::new();
        let long = vec![b'x'; 40_000];
        let headers: [(&[u8], &[u8]); 3] =
            [(b":method", b"POST"), (b":authority", b"/run/snarkpipe.sock"), (b"x-long", long.as_slice())];
        let block = encoder.encode(headers);
        let mut bytes = PREFACE.to_vec();
        // Sent as a HEADERS and two CONTINUATIONs, padded and with priority.
        let (a, rest) = block.split_at(10_000);
        let (b, c) = rest.split_at(10_000);
        let mut first = vec![3u8];
        first.extend_from_slice(&[0, 0, 0, 1, 16]);
        first.extend_from_slice(a);
        first.extend_from_slice(&[0, 0, 0]);
        bytes.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 1, &first));
        bytes.extend(frame(CONTINUATION, 0, 1, b));
        bytes.extend(frame(CONTINUATION, END_HEADERS, 1, c));
        let out = through(&bytes, 4096);
        let mut rest = &out[PREFACE_LEN..];
        let mut fragment = Vec::new();
        let mut kinds = Vec::new();
        while !rest.is_empty() {
            let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
            assert!(len <= MAX_FRAME);
            let (this, after) = rest.split_at(FRAME_HEADER_LEN + len);
            kinds.push((this[3], this[4]));
            let payload = &this[FRAME_HEADER_LEN..];
            fragment.extend_from_slice(if this[3] == HEADERS { &payload[5..] } else { payload });
            rest = after;
        }
        assert_eq!(kinds, [(HEADERS, PRIORITY | END_STREAM), (CONTINUATION, 0), (CONTINUATION, END_HEADERS)]);
        let decoded = loona_hpack::Decoder::new().decode(&fragment).unwrap();
        assert_eq!(authority_of(&decoded), b"localhost");
        assert_eq!(decoded[2].1, long);
    }
}
