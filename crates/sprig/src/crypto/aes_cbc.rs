//! `encryptAES`/`decryptAES`: AES-256-CBC, the key the password's bytes zero-padded (or cut)
//! to 32, a random IV before the ciphertext, PKCS#7-style padding, base64. Decryption fails
//! where Go panics, with the panic's text.

use aes::cipher::{BlockCipherDecrypt as _, BlockCipherEncrypt as _, KeyInit as _};

use crate::encoding::{b64_decode, b64_encode};
use crate::random::random_bytes;

fn cipher(password: &str) -> aes::Aes256 {
    let mut key = [0u8; 32];
    let p = password.as_bytes();
    let n = p.len().min(32);
    key[..n].copy_from_slice(&p[..n]);
    aes::Aes256::new(&key.into())
}

pub(super) fn encrypt(password: &str, plaintext: &str) -> String {
    if plaintext.is_empty() {
        return String::new();
    }
    let aes = cipher(password);
    let mut content = plaintext.as_bytes().to_vec();
    let pad = 16 - content.len() % 16;
    content.extend(std::iter::repeat_n(pad as u8, pad));
    let mut out = random_bytes(16);
    let mut prev = [0u8; 16];
    prev.copy_from_slice(&out);
    for chunk in content.chunks(16) {
        let mut block = [0u8; 16];
        for i in 0..16 {
            block[i] = chunk[i] ^ prev[i];
        }
        let mut b = block.into();
        aes.encrypt_block(&mut b);
        prev.copy_from_slice(&b);
        out.extend_from_slice(&prev);
    }
    b64_encode(&out)
}

pub(super) fn decrypt(password: &str, crypt64: &str) -> Result<String, String> {
    if crypt64.is_empty() {
        return Ok(String::new());
    }
    let crypt = b64_decode(crypt64.as_bytes())
        .map_err(|at| format!("illegal base64 data at input byte {at}"))?;
    if crypt.len() < 16 {
        return Err(format!(
            "runtime error: slice bounds out of range [:16] with capacity {}",
            crypt.len()
        ));
    }
    let (iv, body) = crypt.split_at(16);
    if body.len() % 16 != 0 {
        return Err("crypto/cipher: input not full blocks".into());
    }
    let aes = cipher(password);
    let mut out = Vec::with_capacity(body.len());
    let mut prev: &[u8] = iv;
    for chunk in body.chunks(16) {
        let mut b = [0u8; 16];
        b.copy_from_slice(chunk);
        let mut block = b.into();
        aes.decrypt_block(&mut block);
        out.extend(block.iter().zip(prev).map(|(x, p)| x ^ p));
        prev = chunk;
    }
    let Some(&last) = out.last() else {
        return Err("runtime error: index out of range [-1]".into());
    };
    let keep = out.len() as i64 - i64::from(last);
    if keep < 0 {
        return Err(format!(
            "runtime error: slice bounds out of range [:{keep}]"
        ));
    }
    out.truncate(keep as usize);
    Ok(String::from_utf8_lossy(&out).into_owned())
}
