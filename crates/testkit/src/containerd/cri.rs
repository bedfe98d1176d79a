//! The one CRI call a test needs: `runtime.v1.ImageService/PullImage`, the pull kubelet makes.
//! Unlike `ctr images pull --hosts-dir`, it goes through the CRI plugin and so through the
//! registry configuration of containerd's own config file (`config_path`) — what a node's
//! bootstrap changes. gRPC over HTTP/2 on the unix socket, the two protobuf messages encoded by
//! hand (one string field each), so no gRPC stack is needed.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// `PullImageRequest { image: ImageSpec { image: reference } }` as a gRPC message (uncompressed
/// flag and length prefix included).
pub(crate) fn pull_request(reference: &str) -> Vec<u8> {
    let spec = field(1, reference.as_bytes());
    let request = field(1, &spec);
    let mut framed = vec![0];
    framed.extend_from_slice(&u32::try_from(request.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(&request);
    framed
}

/// A length-delimited protobuf field.
fn field(number: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(u64::from(number << 3 | 2), &mut out);
    varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// `PullImageResponse.image_ref` (field 1) of a gRPC message body.
pub(crate) fn image_ref(body: &[u8]) -> Option<String> {
    let message = body.get(5..)?;
    let (&tag, rest) = message.split_first()?;
    if tag != (1 << 3 | 2) {
        return None;
    }
    let (mut len, mut shift, mut used) = (0usize, 0, 0);
    for &byte in rest {
        used += 1;
        len |= usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
    }
    let value = rest.get(used..used + len)?;
    String::from_utf8(value.to_vec()).ok()
}

/// Pulls `reference` through CRI on `socket`: the image id (`sha256:…` of its config), or the
/// gRPC status message.
pub async fn pull_image(socket: &Path, reference: &str) -> Result<String, String> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| format!("connect {}: {e}", socket.display()))?;
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(connection);
    let request = http::Request::post("http://localhost/runtime.v1.ImageService/PullImage")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from(pull_request(reference))))
        .unwrap();
    let call = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("PullImage: {e}"))?;
        let headers = response.headers().clone();
        let collected = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("PullImage body: {e}"))?;
        let trailers = collected.trailers().cloned().unwrap_or_default();
        let body = collected.to_bytes();
        // A failing call may answer "trailers-only": the status in the headers.
        let status = |name: &str| {
            trailers
                .get(name)
                .or_else(|| headers.get(name))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        match status("grpc-status").as_deref() {
            Some("0") => image_ref(&body).ok_or_else(|| "PullImage: no image_ref".to_owned()),
            code => Err(format!(
                "PullImage: gRPC status {}: {}",
                code.unwrap_or("missing"),
                status("grpc-message").unwrap_or_default()
            )),
        }
    };
    tokio::time::timeout(Duration::from_secs(120), call)
        .await
        .map_err(|_| "PullImage took over two minutes".to_owned())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_the_protobuf_kubelet_sends() {
        // protoc --encode=runtime.v1.PullImageRequest: 0a 05 0a 03 "a:b"
        assert_eq!(
            pull_request("a:b"),
            [0, 0, 0, 0, 7, 0x0a, 5, 0x0a, 3, b'a', b':', b'b']
        );
        let long = "r".repeat(200);
        let framed = pull_request(&long);
        // Lengths past 127 take two varint bytes: 200 = c8 01, 203 = cb 01.
        assert_eq!(&framed[5..10], &[0x0a, 0xcb, 0x01, 0x0a, 0xc8]);
    }

    #[test]
    fn the_image_ref_is_read_from_the_response() {
        let mut body = vec![0, 0, 0, 0, 9, 0x0a, 7];
        body.extend_from_slice(b"sha256:");
        assert_eq!(image_ref(&body).as_deref(), Some("sha256:"));
        assert_eq!(image_ref(&[0, 0, 0, 0, 0]), None);
    }
}
