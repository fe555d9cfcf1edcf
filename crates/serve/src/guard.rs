//! Which browsers' requests the server takes, as development servers guard against DNS rebinding
//! and cross-site requests: a page the operator opens elsewhere must not steer a server on their
//! machine, even one on loopback without credentials.
//!
//! - `Host` must name this server: a loopback name, an IP address (a page can only reach one by
//!   that address, which makes it the server's own origin), or a name the operator allowed
//!   (`--allowed-host`). A page on a rebound name of its own gets `403`.
//! - `Origin`, where a browser sends one, must be the server's own (the `Host` it was reached by)
//!   or the configured Label Studio's; `null` and any other get `403`. Label Studio calls its
//!   ML backend from its server, which sends none.
//! - A `POST` to a route that starts work or changes what is served must say its body is JSON
//!   (`Content-Type: application/json`): the types a page may send cross-site without asking
//!   first (`text/plain`, forms) get `415`.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::auth::is_studio_route;
use crate::http::ServeError;

/// Refuses a request whose `Host`, `Origin` or (on a route that starts work) `Content-Type` a
/// browser page elsewhere could have chosen.
pub(crate) async fn admit(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let refused = host(request.headers(), &state.options.allowed_hosts)
        .and_then(|host| origin(request.headers(), host, &state))
        .and_then(|()| content_type(&request));
    match refused {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    }
}

/// The `Host` the request names, when it is this server's.
fn host<'a>(headers: &'a HeaderMap, allowed: &[String]) -> Result<&'a str, ServeError> {
    let forbidden = |message: String| ServeError::new(StatusCode::FORBIDDEN, message);
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| forbidden("Host: missing; expected this server's address".into()))?;
    if is_own_host(hostname(host), allowed) {
        Ok(host)
    } else {
        Err(forbidden(format!(
            "Host {host:?} is not a name of this server (a page on another site may have \
             rebound it to this address); start the server with --allowed-host {} if it is",
            hostname(host)
        )))
    }
}

/// `host` without its port (and an IPv6 address without its brackets).
fn hostname(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(address, _)| address);
    }
    host.rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(host, |(name, _)| name)
}

/// Whether `name` is one of this server's: a loopback name, an IP address, or one `allowed`.
fn is_own_host(name: &str, allowed: &[String]) -> bool {
    let name = name.trim_end_matches('.');
    name.parse::<IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || name.to_ascii_lowercase().ends_with(".localhost")
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

/// Refuses an `Origin` that is neither the server's own (reached as `host`) nor the configured
/// Label Studio's.
fn origin(headers: &HeaderMap, host: &str, state: &AppState) -> Result<(), ServeError> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or_default();
    let own = origin.split_once("://").is_some_and(|(scheme, authority)| {
        matches!(scheme, "http" | "https") && authority.eq_ignore_ascii_case(host)
    });
    let label_studio = state
        .studio
        .label_studio_origin()
        .is_some_and(|studio| studio.eq_ignore_ascii_case(origin));
    if own || label_studio {
        return Ok(());
    }
    Err(ServeError::new(
        StatusCode::FORBIDDEN,
        format!(
            "Origin {origin:?}: a page of another site may not use this server; only its own \
             pages and the configured Label Studio's may"
        ),
    ))
}

/// Refuses a `POST` to a route that starts work or changes what is served unless its body is
/// said to be JSON.
fn content_type(request: &Request) -> Result<(), ServeError> {
    if request.method() != Method::POST || !is_studio_route(request.uri().path()) {
        return Ok(());
    }
    let essence = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .map(|t| t.split(';').next().unwrap_or_default().trim());
    match essence {
        Some(t) if t.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(ServeError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Type {:?}: this route takes JSON; send Content-Type: application/json",
                essence.unwrap_or("(none)")
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_the_servers_when_loopback_an_address_or_allowed() {
        let allowed = ["studio.internal".to_string()];
        for own in [
            "localhost:8080",
            "LOCALHOST",
            "app.localhost:1",
            "127.0.0.1:9090",
            "10.1.2.3",
            "[::1]:8080",
            "Studio.Internal:9090",
        ] {
            assert!(is_own_host(hostname(own), &allowed), "{own}");
        }
        for foreign in ["evil.example:8080", "localhost.evil.example", "x", ""] {
            assert!(!is_own_host(hostname(foreign), &allowed), "{foreign}");
        }
    }
}
