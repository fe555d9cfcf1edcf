//! Who may use the routes that start work or change what is served: HTTP Basic credentials, as
//! Label Studio sends them to an ML backend whose authentication is `BASIC_AUTH`, compared in
//! constant time. `/setup`, `/predict`, `/webhook` and `/versions` (with `/versions/NAME/serve`,
//! which changes the version served) always ask for them when the server has credentials; with
//! [`Guarded::Every`] every route but `/health` does.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use subtle::ConstantTimeEq;

use crate::http::ServeError;

/// A user name and password that clients give as HTTP Basic credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    user: String,
    password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password is a secret: logs and errors never show it.
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Credentials of `user` (not empty, no `:`, as HTTP Basic cannot carry one) and `password`
    /// (not empty).
    pub fn new(user: &str, password: &str) -> Result<Self, String> {
        if user.is_empty() || user.contains(':') {
            return Err("the user name: expected a name without `:`".into());
        }
        if password.is_empty() {
            return Err("the password: expected one, not empty".into());
        }
        Ok(Self {
            user: user.to_string(),
            password: password.to_string(),
        })
    }

    /// Credentials from a file whose first line is `user:password`; an error names the file
    /// (never its content).
    pub fn read(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let line = text.lines().next().unwrap_or_default();
        let (user, password) = line.split_once(':').ok_or_else(|| {
            format!(
                "{}: line 1: expected `user:password` (the password after the first `:`)",
                path.display()
            )
        })?;
        Self::new(user, password.trim_end_matches('\r'))
            .map_err(|e| format!("{}: line 1: {e}", path.display()))
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Whether an `Authorization` header carries these credentials: `Basic` (in any case) and
    /// `user:password` in base64, the secret compared in constant time.
    fn admit(&self, header: Option<&HeaderValue>) -> bool {
        let Some((scheme, token)) = header
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.trim().split_once(' '))
        else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("basic") {
            return false;
        }
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(token.trim()) else {
            return false;
        };
        let expected = format!("{}:{}", self.user, self.password);
        // Unequal lengths answer at once: the length is all that leaks.
        bool::from(decoded.as_slice().ct_eq(expected.as_bytes()))
    }
}

/// Which routes ask for credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Guarded {
    /// Those that start work for Label Studio or change what is served: `/setup`, `/predict`,
    /// `/webhook`, `/versions`.
    #[default]
    Studio,
    /// Every route but `/health` (which probes use): `/tag`, `/model` and the page too.
    Every,
}

/// The routes a [`Guarded::Studio`] server guards.
const STUDIO_ROUTES: [&str; 4] = ["/setup", "/predict", "/webhook", "/versions"];

/// The server's credentials and the routes that ask for them.
#[derive(Debug, Clone)]
pub struct Auth {
    /// The credentials clients must give.
    pub credentials: Credentials,
    /// Which routes ask for them.
    pub guarded: Guarded,
}

/// Whether `path` is a route that starts work for Label Studio or changes what is served.
pub(crate) fn is_studio_route(path: &str) -> bool {
    STUDIO_ROUTES.contains(&path) || path.starts_with("/versions/")
}

impl Auth {
    fn guards(&self, path: &str) -> bool {
        match self.guarded {
            Guarded::Studio => is_studio_route(path),
            Guarded::Every => path != "/health",
        }
    }
}

/// Answers `401` to a request of a guarded route without the credentials.
pub(crate) async fn require(
    State(auth): State<Option<Auth>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(auth) = &auth
        && auth.guards(request.uri().path())
        && !auth
            .credentials
            .admit(request.headers().get(header::AUTHORIZATION))
    {
        let message = if request.uri().path() == "/webhook" {
            "this route needs the server's HTTP Basic credentials: Label Studio's webhook sends \
             none of its own, so give it the header Authorization: Basic ... (the project's \
             Settings, Webhooks)"
        } else {
            "this route needs the server's HTTP Basic credentials (in Label Studio: the model's \
             Authentication, Basic)"
        };
        let mut response = ServeError::new(StatusCode::UNAUTHORIZED, message).into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"nertrain\", charset=\"UTF-8\""),
        );
        return response;
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(text: &str) -> HeaderValue {
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        HeaderValue::from_str(&format!("Basic {encoded}")).unwrap()
    }

    #[test]
    fn admits_only_the_exact_credentials() {
        let credentials = Credentials::new("studio", "s3cret:x").unwrap();
        assert!(credentials.admit(Some(&basic("studio:s3cret:x"))));
        let lower = HeaderValue::from_str(&format!(
            "basic {}",
            base64::engine::general_purpose::STANDARD.encode("studio:s3cret:x")
        ))
        .unwrap();
        assert!(credentials.admit(Some(&lower)));
        for wrong in ["studio:s3cret", "studio:s3cret:y", "Studio:s3cret:x", ""] {
            assert!(!credentials.admit(Some(&basic(wrong))), "{wrong}");
        }
        assert!(!credentials.admit(None));
        assert!(!credentials.admit(Some(&HeaderValue::from_static("Bearer abc"))));
        assert!(!credentials.admit(Some(&HeaderValue::from_static("Basic !!!"))));
        assert!(!format!("{credentials:?}").contains("s3cret"));
    }

    #[test]
    fn refuses_credentials_basic_auth_cannot_carry() {
        assert!(Credentials::new("a:b", "c").is_err());
        assert!(Credentials::new("", "c").is_err());
        assert!(Credentials::new("a", "").is_err());
    }

    #[test]
    fn reads_a_credentials_file_without_showing_it() {
        let dir = std::env::temp_dir().join(format!("nertrain-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good");
        std::fs::write(&good, "studio:pa:ss\r\n").unwrap();
        let read = Credentials::read(&good).unwrap();
        assert_eq!(read, Credentials::new("studio", "pa:ss").unwrap());
        let bad = dir.join("bad");
        std::fs::write(&bad, "no-colon-secret\n").unwrap();
        let error = Credentials::read(&bad).unwrap_err();
        assert!(
            error.contains("line 1") && !error.contains("no-colon-secret"),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn guards_the_studio_routes_or_every_route_but_health() {
        let credentials = Credentials::new("a", "b").unwrap();
        let studio = Auth {
            credentials: credentials.clone(),
            guarded: Guarded::Studio,
        };
        assert!(studio.guards("/setup") && studio.guards("/webhook"));
        assert!(studio.guards("/predict") && studio.guards("/versions"));
        assert!(studio.guards("/versions/v2/serve") && studio.guards("/versions/base/serve"));
        assert!(!studio.guards("/tag") && !studio.guards("/"));
        let every = Auth {
            credentials,
            guarded: Guarded::Every,
        };
        assert!(every.guards("/tag") && every.guards("/") && every.guards("/model"));
        assert!(!every.guards("/health"));
    }
}
