//! Label Studio's REST API, as much of it as learning needs: a project's labeling config and
//! annotated tasks; and to keep the project in step with the served version, its tasks page by
//! page, predictions imported, and the project's model version set.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use nertrain_annotate::label_studio::rest::{
    Access, Created, Filter, Filters, ModelVersion, ProjectAnswer, Refresh, TaskPrediction,
    TasksPage, TasksQuery,
};

/// Label Studio's base URL and an API key: a legacy token, or a personal access token (a JWT
/// refresh token, exchanged for an access token on each use). Only the origin and a plain path
/// prefix are kept, so every URL fetched is them and a fixed API path.
#[derive(Clone, PartialEq, Eq)]
pub struct Connection {
    /// `http://localhost:8080`: scheme, host and port, nothing else.
    origin: String,
    /// Where Label Studio is served under its origin (`/label-studio`), or empty: plain
    /// segments, without a trailing `/`.
    prefix: String,
    key: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A key is a secret: logs and errors never show it.
        f.debug_struct("Connection")
            .field("origin", &self.origin)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// The most of an error answer's body a message repeats.
const ERROR_BODY: u64 = 300;

impl Connection {
    /// A connection to the Label Studio at `url`: an origin (`http://host:port`, or https), and
    /// where Label Studio is served under a path prefix, that path (`http://host/label-studio`,
    /// plain segments of letters, digits, `-`, `_`, `.` and `~`; a trailing `/` is allowed). No
    /// user and password, query or fragment, so that nothing in it can choose what is fetched
    /// beyond Label Studio's own API. An error never repeats a user and password.
    pub fn new(url: &str, key: &str) -> Result<Self, ClientError> {
        let expected = "expected Label Studio's address, such as http://localhost:8080 (or \
                        http://host/label-studio where it is served under a path)";
        let unusable = |why: String| ClientError::Address(format!("{why}; {expected}"));
        let uri: ureq::http::Uri = url.parse().map_err(|_| unusable("not a URL".into()))?;
        let scheme = uri.scheme_str().unwrap_or_default();
        if scheme != "http" && scheme != "https" {
            return Err(unusable("the scheme must be http or https".into()));
        }
        let authority = uri.authority().ok_or_else(|| unusable("no host".into()))?;
        if authority.as_str().contains('@') {
            // The user and password are secrets: the message names neither.
            return Err(unusable(
                "a user and password in the URL are not used (give the API key instead)".into(),
            ));
        }
        if uri.query().is_some() || url.contains('#') {
            return Err(unusable("a query or fragment is not allowed".into()));
        }
        let prefix = path_prefix(uri.path()).ok_or_else(|| {
            unusable(format!(
                "the path {:?}: expected plain segments (letters, digits, -, _, . and ~; no \
                 `..`)",
                uri.path()
            ))
        })?;
        if key.is_empty() {
            return Err(ClientError::Address("the API key is empty".into()));
        }
        Ok(Self {
            origin: format!("{scheme}://{authority}"),
            prefix,
            key: key.to_string(),
        })
    }

    /// Label Studio's origin: what its pages send as `Origin`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Label Studio's base URL: its origin and path prefix, which every API path goes under.
    pub fn base(&self) -> String {
        format!("{}{}", self.origin, self.prefix)
    }

    /// The project's annotated tasks, as Label Studio's JSON export, streamed into `file` (so
    /// that the server never holds more than a buffer of it); an export of more than `limit`
    /// bytes is an error and leaves no file. Gives the bytes written.
    pub(crate) fn export_to(
        &self,
        project: u64,
        file: &Path,
        limit: u64,
    ) -> Result<u64, ClientError> {
        let (url, mut response) = self.call(
            &format!("/api/projects/{project}/export?exportType=JSON"),
            &[],
        )?;
        let written = std::fs::File::create(file).and_then(|mut out| {
            let mut body = response.body_mut().with_config().reader().take(limit + 1);
            let written = std::io::copy(&mut body, &mut out)?;
            out.sync_all()?;
            Ok(written)
        });
        let failed = |message: String| {
            let _ = std::fs::remove_file(file);
            Err(ClientError::Export {
                at: url.clone(),
                message,
            })
        };
        match written {
            Ok(written) if written > limit => failed(format!(
                "the export is larger than {limit} bytes, the most this server reads \
                 (--max-export)"
            )),
            Ok(written) => Ok(written),
            Err(e) => failed(format!("{e} (writing {})", file.display())),
        }
    }

    /// The project's labeling config.
    pub fn label_config(&self, project: u64) -> Result<String, ClientError> {
        let path = format!("/api/projects/{project}");
        let answer: ProjectAnswer = serde_json::from_slice(&self.get(&path, 64 << 20)?)
            .map_err(unexpected(format!("{}{path}", self.base()), "a project"))?;
        Ok(answer.label_config)
    }

    /// Up to `size` of `project`'s tasks whose id is above `after` (all, without it), by id: a
    /// page that tasks deleted meanwhile cannot shift, as page numbers would. `total` is how
    /// many such tasks there are.
    pub(crate) fn tasks_after(
        &self,
        project: u64,
        after: Option<i64>,
        size: usize,
    ) -> Result<TasksPage, ClientError> {
        let items = after.map(|id| Filter {
            filter: "filter:tasks:id",
            operator: "greater",
            kind: "Number",
            value: id,
        });
        let query = TasksQuery {
            filters: Filters {
                conjunction: "and",
                items: items.into_iter().collect(),
            },
            ordering: ["tasks:id"],
        };
        let path = format!("/api/tasks?project={project}&page=1&page_size={size}");
        let query = serde_json::to_string(&query).map_err(transport(&path))?;
        let (url, mut response) = self.call(&path, &[("query", &query)])?;
        let body = response
            .body_mut()
            .with_config()
            .limit(256 << 20)
            .read_to_vec()
            .map_err(transport(&url))?;
        serde_json::from_slice(&body).map_err(unexpected(url, "a page of tasks"))
    }

    /// Imports `predictions` into `project`: how many Label Studio made.
    pub(crate) fn import_predictions(
        &self,
        project: u64,
        predictions: &[TaskPrediction],
    ) -> Result<usize, ClientError> {
        let path = format!("/api/projects/{project}/import/predictions");
        let body = serde_json::to_vec(predictions).map_err(transport(&path))?;
        let answer = self.send("POST", &path, body)?;
        let created: Created = serde_json::from_slice(&answer).map_err(unexpected(
            format!("{}{path}", self.base()),
            "{\"created\": N}",
        ))?;
        Ok(created.created)
    }

    /// Sets `project`'s model version: the predictions whose scores the Data Manager sorts by.
    pub(crate) fn set_model_version(&self, project: u64, version: &str) -> Result<(), ClientError> {
        let path = format!("/api/projects/{project}");
        let body = serde_json::to_vec(&ModelVersion {
            model_version: version,
        })
        .map_err(transport(&path))?;
        self.send("PATCH", &path, body).map(drop)
    }

    /// The answer to `method path` with a JSON `body`, of at most a MiB; an error answer's
    /// status and the start of its body in the message.
    fn send(&self, method: &str, path: &str, body: Vec<u8>) -> Result<Vec<u8>, ClientError> {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(300)))
            .http_status_as_error(false)
            .build()
            .new_agent();
        let authorization = self.authorization(&agent, &self.base())?;
        let url = format!("{}{path}", self.base());
        let at = format!("{method} {url}");
        let request = match method {
            "PATCH" => agent.patch(&url),
            _ => agent.post(&url),
        };
        let mut response = request
            .header("Authorization", &authorization)
            .content_type("application/json")
            .send(&body[..])
            .map_err(transport(&at))?;
        let status = response.status();
        let limit = if status.is_success() {
            1 << 20
        } else {
            ERROR_BODY
        };
        let mut answer = Vec::new();
        response
            .body_mut()
            .with_config()
            .reader()
            .take(limit)
            .read_to_end(&mut answer)
            .map_err(transport(&at))?;
        if !status.is_success() {
            let said = String::from_utf8_lossy(&answer).into_owned();
            return Err(ClientError::Refused { at, status, said });
        }
        Ok(answer)
    }

    /// The body of `GET path`, of at most `limit` bytes.
    fn get(&self, path: &str, limit: u64) -> Result<Vec<u8>, ClientError> {
        let (url, mut response) = self.call(path, &[])?;
        response
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_vec()
            .map_err(transport(&url))
    }

    /// `GET path` of the base, with `query` pairs (encoded) added, authorised: the URL and the
    /// response, its body unread.
    fn call(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<(String, ureq::http::Response<ureq::Body>), ClientError> {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(300)))
            .build()
            .new_agent();
        let authorization = self.authorization(&agent, &self.base())?;
        let url = format!("{}{path}", self.base());
        let mut request = agent.get(&url);
        for (key, value) in query {
            request = request.query(*key, *value);
        }
        let response = request
            .header("Authorization", &authorization)
            .call()
            .map_err(transport(&url))?;
        Ok((url, response))
    }

    /// The `Authorization` header: `Token` with a legacy token; `Bearer` with an access token
    /// for a personal access token.
    fn authorization(&self, agent: &ureq::Agent, base: &str) -> Result<String, ClientError> {
        if !is_jwt(&self.key) {
            return Ok(format!("Token {}", self.key));
        }
        // Django routes it with its trailing slash only.
        let url = format!("{base}/api/token/refresh/");
        let body = serde_json::to_vec(&Refresh { refresh: &self.key }).map_err(transport(&url))?;
        let mut response = agent
            .post(&url)
            .content_type("application/json")
            .send(&body[..])
            .map_err(|e| ClientError::Transport {
                at: url.clone(),
                message: format!("{e} (exchanging the personal access token)"),
            })?;
        let access: Access = serde_json::from_slice(
            &response
                .body_mut()
                .with_config()
                .limit(1 << 20)
                .read_to_vec()
                .map_err(transport(&url))?,
        )
        .map_err(unexpected(url, "{\"access\": \"...\"}"))?;
        Ok(format!("Bearer {}", access.access))
    }
}

/// What went wrong with Label Studio's API, named by the request (its method and URL, never the
/// key, nor a user and password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// The address or the key cannot be used: said before anything is sent.
    Address(String),
    /// The request `at` could not be made, or its answer not read.
    Transport {
        /// The request.
        at: String,
        /// Why.
        message: String,
    },
    /// Label Studio answered the request `at` with an error `status`, saying `said` (the start of
    /// its body).
    Refused {
        /// The request.
        at: String,
        /// The answer's status.
        status: ureq::http::StatusCode,
        /// The start of the answer's body.
        said: String,
    },
    /// The answer to `at` is not what the API gives: `expected` was.
    Unexpected {
        /// The request.
        at: String,
        /// What the API answers.
        expected: &'static str,
        /// Why the answer is not that.
        message: String,
    },
    /// The project's export from `at` could not be kept: too large, or not written.
    Export {
        /// The request.
        at: String,
        /// Why.
        message: String,
    },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Address(message) => f.write_str(message),
            ClientError::Transport { at, message } | ClientError::Export { at, message } => {
                write!(f, "{at}: {message}")
            }
            ClientError::Refused { at, status, said } => write!(f, "{at}: {status}: {said}"),
            ClientError::Unexpected {
                at,
                expected,
                message,
            } => write!(f, "{at}: expected {expected}: {message}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// A failure of the request `at`, as a [`ClientError::Transport`].
fn transport<E: std::fmt::Display>(at: &str) -> impl FnOnce(E) -> ClientError + '_ {
    move |e| ClientError::Transport {
        at: at.to_string(),
        message: e.to_string(),
    }
}

/// An answer to `at` that is not `expected`, as a [`ClientError::Unexpected`].
fn unexpected<E: std::fmt::Display>(
    at: String,
    expected: &'static str,
) -> impl FnOnce(E) -> ClientError {
    move |e| ClientError::Unexpected {
        at,
        expected,
        message: e.to_string(),
    }
}

/// `path` as a prefix to put API paths under: empty for `/` or none, else `/a/b` without a
/// trailing `/`; `None` for anything but plain segments (no `..`, escapes or empty segments),
/// so that the prefix cannot lead out of where Label Studio is served.
fn path_prefix(path: &str) -> Option<String> {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Some(String::new());
    }
    let segments = trimmed.strip_prefix('/')?.split('/');
    let plain = |segment: &str| {
        !segment.is_empty()
            && segment != "."
            && segment != ".."
            && segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b))
    };
    segments.clone().all(plain).then(|| trimmed.to_string())
}

/// Whether `key` is a JWT (three base64url parts), as personal access tokens are; legacy
/// tokens are 40 hex digits.
fn is_jwt(key: &str) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'=')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_personal_access_tokens_from_legacy_ones() {
        assert!(is_jwt(
            "eyJhbGciOiJIUzI1NiJ9.eyJ0b2tlbl90eXBlIjoicmVmcmVzaCJ9.c2lnbmF0dXJl"
        ));
        assert!(!is_jwt("0123456789abcdef0123456789abcdef01234567"));
        assert!(!is_jwt("a..b"));
        let connection = Connection::new("http://localhost:8080/", "secret").unwrap();
        assert!(!format!("{connection:?}").contains("secret"));
        assert_eq!(connection.origin(), "http://localhost:8080");
        assert_eq!(connection.base(), "http://localhost:8080");
    }

    #[test]
    fn a_path_prefix_is_the_base_the_api_goes_under() {
        for (url, origin, base) in [
            (
                "http://host:8080/label-studio",
                "http://host:8080",
                "http://host:8080/label-studio",
            ),
            (
                "http://host:8080/label-studio/",
                "http://host:8080",
                "http://host:8080/label-studio",
            ),
            (
                "https://host/tools/ls-1.23",
                "https://host",
                "https://host/tools/ls-1.23",
            ),
        ] {
            let connection = Connection::new(url, "k").unwrap();
            assert_eq!(
                (connection.origin(), &connection.base()[..]),
                (origin, base)
            );
        }
        for bad in [
            "http://host:1/a/../api",
            "http://host:1/a//b",
            "http://host:1/%2e%2e/x",
            "http://host:1/a b",
            "http://host:1/./x",
        ] {
            assert!(Connection::new(bad, "k").is_err(), "{bad}");
        }
    }

    #[test]
    fn takes_an_origin_only_and_never_repeats_a_password() {
        for ok in [
            "http://localhost:8080",
            "https://studio.example.org/",
            "http://[::1]:9",
        ] {
            assert!(Connection::new(ok, "k").is_ok(), "{ok}");
        }
        for bad in [
            "http://127.0.0.1:22/api/x?y=1",
            "http://host:1/?q",
            "http://host:1/#frag",
            "file:///etc/passwd",
            "gopher://host:70",
            "localhost:8080",
            "",
        ] {
            assert!(Connection::new(bad, "k").is_err(), "{bad}");
        }
        let error = Connection::new("http://user:hunter2@host:8080", "k")
            .unwrap_err()
            .to_string();
        assert!(
            !error.contains("hunter2") && !error.contains("user:"),
            "{error}"
        );
        assert_eq!(
            Connection::new("http://host:8080", "").unwrap_err(),
            ClientError::Address("the API key is empty".into())
        );
        assert_eq!(
            Connection::new("ftp://host", "k").unwrap_err().to_string(),
            "the scheme must be http or https; expected Label Studio's address, such as \
             http://localhost:8080 (or http://host/label-studio where it is served under a path)"
        );
    }
}
