//! The authenticate stage: the request's Basic or Bearer credentials against the accounts; a
//! refusal is a 403 for known credentials without the access, else a 401 whose challenge names
//! our realm (and, with tokens, our token endpoint and the scope the request needs).

use http::{Request, Response, header};
use oci::ErrorCode;

use super::respond::{error_response, unauthorized};
use super::{Listener, Peer, token_endpoint};
use crate::auth::{Access, Denied};
use crate::body::ResponseBody;

impl Listener {
    /// `None` when the request's credentials give `needed` on `repository` (`None`: the base
    /// endpoint or an unparsable path); else the refusal to send.
    pub(super) fn authenticate<B>(
        &self,
        request: &Request<B>,
        peer: Peer,
        needed: Access,
        repository: Option<&str>,
    ) -> Option<Response<ResponseBody>> {
        let authorization = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let checked = self.accounts.check_request(
            authorization,
            needed,
            repository,
            token_endpoint::unix_now(),
        );
        if let Err(denied) = checked {
            let message = match denied {
                Denied::Forbidden => {
                    return Some(error_response(
                        403,
                        ErrorCode::Denied,
                        if needed == Access::Push {
                            "these credentials may not write to this registry"
                        } else {
                            "these credentials may not read this repository"
                        },
                    ));
                }
                Denied::Unauthenticated if authorization.is_some() => "invalid credentials",
                Denied::Unauthenticated => "authentication required",
                Denied::InvalidToken => "invalid or expired token",
                Denied::InsufficientScope => "the token does not cover this repository",
            };
            let mut response = unauthorized(message);
            if self.accounts.tokens().is_some() {
                let scope = repository.map(|r| crate::auth::Scope::needed(r, needed));
                let error = match denied {
                    Denied::InvalidToken => Some("invalid_token"),
                    Denied::InsufficientScope => Some("insufficient_scope"),
                    _ => None,
                };
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    token_endpoint::bearer_challenge(
                        request.headers(),
                        request.uri().authority().map(|a| a.as_str()),
                        peer.tls,
                        scope.as_ref(),
                        error,
                    ),
                );
            }
            return Some(response);
        }
        None
    }
}
