//! The secret files a config names, and the one model every one of them follows: root owns the
//! file, group `jetson-detectd` may read it (`root:jetson-detectd`, mode 0640), and the service
//! reads it as a member of that group. The package creates the group and the unit runs in it
//! (`SupplementaryGroups=`), which works alike on every JetPack's systemd and for any number of
//! camera passwords; no secret needs a line of its own in the unit.
//!
//! Owns: which keys of the core name secrets (each RTSP camera's `password_file`,
//! `http.token_file`, `engine.store.signing_key` and `engine.store.password_file`; a component's
//! section names its own, as `mqtt.password_file` and `mqtt.tls.client_key`:
//! `super::whole::Section::secret_files`), checking that each can be read by whoever needs it
//! ([`check_for_run`] for the daemon itself, [`check_for_service`] for `check-config`, which checks
//! them the way the service will see them) and that nobody else can change it: a secret every
//! local user may write is refused, one every local user may read is a warning ([`Exposure`]).
//! Must not: read a secret's contents (each stage reads its own, bounded, and checks what it
//! holds) or print one.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::whole::Config;
use crate::sys::access;

/// The group the packaged service runs in and reads its secrets through.
pub const SERVICE_GROUP: &str = "jetson-detectd";

/// Directories the unit hides from the service (`ProtectHome=yes`): a secret there is out of its
/// reach whatever its permission bits say.
const HIDDEN_FROM_SERVICE: [&str; 3] = ["/home", "/root", "/run/user"];

/// Groups besides [`SERVICE_GROUP`] that the unit gives the service (`SupplementaryGroups=`).
const OTHER_SERVICE_GROUPS: [&str; 2] = ["video", "render"];

/// One secret file of a config.
#[derive(Debug, Clone, PartialEq)]
pub struct SecretFile {
    /// The key that names it: `mqtt.password_file`, `camera[1].source.password_file`, ...
    pub key: String,
    pub path: PathBuf,
    place: Place,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Place {
    /// A component's section's: it forgets it by its key.
    Section,
    /// A camera's source's (its index, and its key inside the `source` table).
    CameraSource(usize, &'static str),
    HttpToken,
    StoreSigningKey,
    StorePassword,
}

impl Config {
    /// Every secret file this config names (the token only while the HTTP server is on).
    pub fn secret_files(&self) -> Vec<SecretFile> {
        let mut files = Vec::new();
        let mut add = |key: String, path: &Path, place: Place| files.push(SecretFile { key, path: path.into(), place });
        for (key, path) in self.sections.secret_files() {
            add(key, &path, Place::Section);
        }
        for (index, camera) in self.cameras.iter().enumerate() {
            for (key, path) in camera.source.kind().secret_files() {
                add(format!("camera[{index}].source.{key}"), path, Place::CameraSource(index, key));
            }
        }
        if let (Some(_), Some(path)) = (self.http.listen_addr(), &self.http.token_file) {
            add("http.token_file".into(), path, Place::HttpToken);
        }
        let store = &self.engine.store;
        if let (true, Some(path)) = (store.push, &store.signing_key) {
            add("engine.store.signing_key".into(), path, Place::StoreSigningKey);
        }
        if let (Some(_), Some(path)) = (&store.url, &store.password_file) {
            add("engine.store.password_file".into(), path, Place::StorePassword);
        }
        files
    }

    /// Leaves `secret` out: the stage that would read it runs without it (a client certificate
    /// goes with its key).
    fn forget(&mut self, secret: &SecretFile) {
        match secret.place {
            Place::Section => self.sections.forget_secret(&secret.key),
            Place::CameraSource(index, key) => {
                if let Some(camera) = self.cameras.get_mut(index) {
                    camera.source.kind_mut().forget_secret(key);
                }
            }
            Place::HttpToken => self.http.token_file = None,
            // The store runs without them: nothing is pushed unsigned, and it goes anonymous.
            Place::StoreSigningKey => {
                self.engine.store.signing_key = None;
                self.engine.store.push = false;
            }
            Place::StorePassword => {
                self.engine.store.password_file = None;
                self.engine.store.username = None;
            }
        }
    }
}

/// What `check-config` found: notes to show, and the config to check the rest of with.
#[derive(Debug)]
pub struct ServiceCheck {
    /// One line per secret that is worth a word: read on the service's behalf, or left to it.
    pub notes: Vec<String>,
    /// The config with the secrets this user may not read (and the service may) left out.
    pub rest: Config,
}

/// The fix for a secret the service cannot read.
fn fix(path: &Path) -> String {
    let path = path.display();
    format!("make it the service's: sudo chgrp {SERVICE_GROUP} {path} && sudo chmod 0640 {path}")
}

fn invalid(config: &Config, secret: &SecretFile, message: String) -> ConfigError {
    ConfigError::Invalid {
        origin: config.origin.clone(),
        key: secret.key.clone(),
        message: format!("{}: {message}", secret.path.display()),
    }
}

/// Whether this process may open `path` for reading: `Some(false)` only for "permission denied";
/// `None` for every other outcome (missing, not a regular file, ...), which the stage that reads
/// the secret reports with its own words.
fn may_open(path: &Path) -> Option<bool> {
    match crate::sys::files::open_regular(path, u64::MAX) {
        Ok(_) => Some(true),
        Err(crate::sys::files::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => Some(false),
        Err(_) => None,
    }
}

/// Why the service, in its groups, cannot read `path`; `None` when it can.
fn denied_to_service(path: &Path, service_gid: u32) -> Option<String> {
    if let Some(hidden) = HIDDEN_FROM_SERVICE.iter().find(|dir| path.starts_with(dir)) {
        return Some(format!(
            "the unit hides {hidden} from the service (ProtectHome=yes); keep secrets in /etc/jetson-detectd"
        ));
    }
    let mut groups: Vec<u32> = OTHER_SERVICE_GROUPS.iter().filter_map(|name| access::group_id(name)).collect();
    groups.push(service_gid);
    access::denied_to_group_reader(path, &groups)
}

/// Who besides root, the owner and the file's group may touch a secret, by its permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Every local user may read it (mode 0644, say): a warning.
    ReadableByAll,
    /// Every local user may write it (mode 0666, say): anyone on the machine could put their own
    /// password or token in; refused.
    WritableByAll,
}

impl Exposure {
    /// From a file's mode; `None` when others have neither bit.
    pub fn of_mode(mode: u32) -> Option<Exposure> {
        if mode & 0o002 != 0 {
            Some(Exposure::WritableByAll)
        } else if mode & 0o004 != 0 {
            Some(Exposure::ReadableByAll)
        } else {
            None
        }
    }
}

/// `run` (and, through it, `check-config`): every secret must be readable by this process, and
/// writable by no one but its owner and group. One that is not is a config error naming the key,
/// the file and the fix, before anything starts. Returns a warning for each secret every local
/// user may read.
pub fn check_for_run(config: &Config) -> Result<Vec<String>, ConfigError> {
    let mut warnings = Vec::new();
    for secret in config.secret_files() {
        let metadata = std::fs::metadata(&secret.path).ok();
        match metadata.as_ref().and_then(|metadata| Exposure::of_mode(metadata.mode())) {
            Some(Exposure::WritableByAll) => {
                let what = metadata.as_ref().map(access::describe).unwrap_or_default();
                return Err(invalid(
                    config,
                    &secret,
                    format!(
                        "every local user may write it ({what}), so anyone on this machine could replace the \
                         secret; {}",
                        fix(&secret.path)
                    ),
                ));
            }
            // The engine store refuses a signing key others may read when it reads it
            // (`crate::backend::fleet`'s `PrivateKey::read`): a warning here would pass
            // `check-config` for a start that then fails.
            Some(Exposure::ReadableByAll) if secret.place == Place::StoreSigningKey => {
                let what = metadata.as_ref().map(access::describe).unwrap_or_default();
                return Err(invalid(
                    config,
                    &secret,
                    format!(
                        "every local user may read it ({what}), and the engine store signs with no key others \
                         may read; {}",
                        fix(&secret.path)
                    ),
                ));
            }
            Some(Exposure::ReadableByAll) => {
                let what = metadata.as_ref().map(access::describe).unwrap_or_default();
                warnings.push(format!(
                    "{}: {}: every local user may read this secret ({what}); {}",
                    secret.key,
                    secret.path.display(),
                    fix(&secret.path)
                ));
            }
            None => {}
        }
        if may_open(&secret.path) == Some(false) {
            let user = access::user_name(access::effective_uid());
            return Err(invalid(
                config,
                &secret,
                format!(
                    "permission denied for user {user}. The service reads every secret as a member of group \
                     {SERVICE_GROUP}: {}",
                    fix(&secret.path)
                ),
            ));
        }
    }
    Ok(warnings)
}

/// `check-config`: each secret the way the service will see it.
///
/// - As root, each secret is read on the service's behalf (by the rest of the check), and when this
///   machine has the service's group, a secret that group may not read is an error: the service
///   would exit 78 at start, and systemd does not restart it.
/// - As another user, a secret this user may not read is expected when the service's group may
///   read it: a note says so and the rest of the check goes on without it. One the service could
///   not read either is an error.
pub fn check_for_service(config: &Config) -> Result<ServiceCheck, ConfigError> {
    let service_gid = access::group_id(SERVICE_GROUP);
    let mut rest = config.clone();
    let mut notes = Vec::new();
    for secret in config.secret_files() {
        let path = secret.path.display();
        match (may_open(&secret.path), access::is_root()) {
            (Some(true), true) => match service_gid {
                Some(gid) => match denied_to_service(&secret.path, gid) {
                    None => notes.push(format!(
                        "{}: {path}: read as root on the service's behalf; the service reads it through group \
                         {SERVICE_GROUP}",
                        secret.key
                    )),
                    Some(why) => {
                        return Err(invalid(
                            config,
                            &secret,
                            format!("the service cannot read it ({why}), so it would not start; {}", fix(&secret.path)),
                        ))
                    }
                },
                None => notes.push(format!(
                    "{}: {path}: read as root; this machine has no group {SERVICE_GROUP} (the package creates \
                     it), so whether the service could read it was not checked",
                    secret.key
                )),
            },
            (Some(false), _) => {
                let user = access::user_name(access::effective_uid());
                let metadata = std::fs::metadata(&secret.path).ok();
                let group = metadata.as_ref().map(|metadata| metadata.gid());
                let service_may = group.is_some_and(|gid| {
                    access::denied_to_group_reader(&secret.path, &[gid]).is_none()
                        && service_gid.is_none_or(|service| service == gid)
                });
                let Some(gid) = group.filter(|_| service_may) else {
                    let what = metadata.as_ref().map(access::describe).unwrap_or_else(|| "not inspectable".into());
                    return Err(invalid(
                        config,
                        &secret,
                        format!(
                            "permission denied for user {user}, and the service could not read it either ({what}); {}",
                            fix(&secret.path)
                        ),
                    ));
                };
                let group = access::group_name(gid);
                let unit = if group == SERVICE_GROUP {
                    String::new()
                } else {
                    format!(
                        " (the packaged unit runs in group {SERVICE_GROUP}, not {group}: `sudo chgrp {SERVICE_GROUP} \
                         {path}`)"
                    )
                };
                notes.push(format!(
                    "{}: {path}: not readable by user {user}, as expected for a secret only root and group {group} \
                     may read; not checked here. The service reads it as a member of group {group}{unit}; \
                     `sudo jetson-detectd check-config` reads it on the service's behalf",
                    secret.key
                ));
                rest.forget(&secret);
            }
            // Readable by a user who is not root, or not openable for another reason: the rest of
            // the check reads it, or names what is wrong with it.
            (Some(true), false) | (None, _) => {}
        }
    }
    Ok(ServiceCheck { notes, rest })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::origin::ConfigOrigin;
    use crate::source::config::SourceConfig;

    /// With the daemon's sections: the MQTT outlet's name secrets of their own.
    fn config(text: &str) -> Config {
        let origin = ConfigOrigin::File("/etc/jetson-detectd/config.toml".into());
        crate::cmd::outlets::schema().from_toml(text, origin, Path::new("/base")).expect("config")
    }

    #[test]
    fn every_secret_key_is_listed_and_the_token_only_while_the_page_is_on() {
        let text = "[mqtt]\nusername = \"u\"\npassword_file = \"mqtt-password\"\n\
                    tls = { ca_file = \"ca.pem\", client_cert = \"c.pem\", client_key = \"k.pem\" }\n\
                    [http]\nlisten = \"0.0.0.0:8090\"\ntoken_file = \"token\"\n\
                    [[camera]]\nname = \"porch\"\n\
                    source = { kind = \"rtsp\", url = \"rtsp://c/s\", user = \"v\", password_file = \"porch.pw\" }\n\
                    [[camera]]\nname = \"demo\"\nsource = { kind = \"synthetic\" }\n";
        let keys: Vec<(String, PathBuf)> =
            config(text).secret_files().into_iter().map(|secret| (secret.key, secret.path)).collect();
        assert_eq!(
            keys,
            [
                ("mqtt.password_file".to_string(), PathBuf::from("/base/mqtt-password")),
                ("mqtt.tls.client_key".into(), "/base/k.pem".into()),
                ("camera[0].source.password_file".into(), "/base/porch.pw".into()),
                ("http.token_file".into(), "/base/token".into()),
            ]
        );
        let page_off = config(&text.replace("listen = \"0.0.0.0:8090\"", "listen = \"\""));
        assert!(page_off.secret_files().iter().all(|secret| secret.key != "http.token_file"));
    }

    #[test]
    fn a_forgotten_secret_leaves_the_rest_of_the_config_alone() {
        let text = "[mqtt]\nusername = \"u\"\npassword_file = \"pw\"\n\
                    [[camera]]\nname = \"porch\"\n\
                    source = { kind = \"rtsp\", url = \"rtsp://c/s\", user = \"v\", password_file = \"porch.pw\" }\n";
        let original = config(text);
        let mut rest = original.clone();
        for secret in original.secret_files() {
            rest.forget(&secret);
        }
        assert!(rest.secret_files().is_empty());
        let mqtt = crate::publish::mqtt::config::MqttConfig::of(&rest);
        assert_eq!(mqtt.username.as_deref(), Some("u"));
        assert!(matches!(&rest.cameras[0].source, SourceConfig::Rtsp(rtsp) if rtsp.user.as_deref() == Some("v")));
    }

    #[test]
    fn others_bits_tell_a_secret_anyone_may_read_from_one_anyone_may_write() {
        assert_eq!(Exposure::of_mode(0o100640), None);
        assert_eq!(Exposure::of_mode(0o100600), None);
        assert_eq!(Exposure::of_mode(0o100644), Some(Exposure::ReadableByAll));
        assert_eq!(Exposure::of_mode(0o100666), Some(Exposure::WritableByAll));
        assert_eq!(Exposure::of_mode(0o100602), Some(Exposure::WritableByAll), "write without read");
    }

    /// Issue 49: password and token files of mode 0644 and 0666 were taken without a word.
    #[test]
    fn a_secret_anyone_may_write_is_refused_and_one_anyone_may_read_is_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let password = dir.path().join("mqtt-password");
        std::fs::write(&password, "secret\n").expect("write");
        let text = format!("[mqtt]\nusername = \"u\"\npassword_file = {:?}\n", password.display().to_string());
        let config = config(&text);
        for (mode, warned) in [(0o640, false), (0o644, true)] {
            std::fs::set_permissions(&password, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let warnings = check_for_run(&config).expect("accepted");
            assert_eq!(warnings.len(), usize::from(warned), "{mode:o}: {warnings:?}");
            assert!(
                warnings.iter().all(|w| w.contains("mqtt.password_file") && w.contains("chmod 0640")),
                "{warnings:?}"
            );
        }
        std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let error = check_for_run(&config).expect_err("refused").to_string();
        assert!(error.contains("`mqtt.password_file`") && error.contains("every local user may write it"), "{error}");
    }

    /// The engine store refuses a signing key every local user may read when `run` opens it: a
    /// warning would have passed `check-config` for a start that fails.
    #[test]
    fn a_signing_key_anyone_may_read_is_refused_not_warned_of() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("fleet.key");
        std::fs::write(&key, "not read here\n").expect("write");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let text = format!(
            "[engine.store]\nurl = \"file:///srv/engines\"\nverify = false\npush = true\nsigning_key = {:?}\n",
            key.display().to_string()
        );
        let error = check_for_run(&config(&text)).expect_err("refused").to_string();
        assert!(
            error.contains("`engine.store.signing_key`")
                && error.contains("every local user may read it")
                && error.contains("chmod 0640"),
            "{error}"
        );
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        assert_eq!(check_for_run(&config(&text)).expect("accepted"), Vec::<String>::new());
    }

    #[test]
    fn a_secret_under_home_is_out_of_the_services_reach() {
        let why = denied_to_service(Path::new("/home/alice/porch.pw"), 0).expect("hidden");
        assert!(why.contains("ProtectHome") && why.contains("/etc/jetson-detectd"), "{why}");
    }
}
