//! The rendered container of a member, started here as the kubelet would start it: its
//! volumes laid out from the rendered ConfigMap and wiring Secret, its env, its command.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use super::named;
use super::support::{http, mur_bin, request, search_path, Home, Resp};

/// The rendered container of `object`, started here as the cluster would start it: its args
/// (the listen address made 127.0.0.1:0), its env, and the ConfigMap and Secret files at the
/// container paths translated to folders under `root`.
pub struct Container {
    child: Child,
    pub port: u16,
}

impl Container {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_container(home: &Home, objects: &[Value], object: &str) -> Container {
    let root = home.root.join("container");
    let mount = |path: &str| root.join(path.trim_start_matches('/'));
    let deployment = named(objects, "Deployment", object);
    let pod = &deployment["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let config_map = named(objects, "ConfigMap", object);
    // The volumes, as the kubelet would lay them out.
    for m in c["volumeMounts"].as_array().unwrap() {
        let dir = mount(m["mountPath"].as_str().unwrap());
        std::fs::create_dir_all(&dir).unwrap();
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap();
        if volume.get("configMap").is_some() {
            for (k, v) in config_map["data"].as_object().unwrap() {
                std::fs::write(dir.join(k), v.as_str().unwrap()).unwrap();
            }
        }
        if let Some(s) = volume.get("secret") {
            // No `items`: every key of the Secret the volume names is a file.
            assert_eq!(s.get("items"), None);
            let secret = named(objects, "Secret", s["secretName"].as_str().unwrap());
            for key in secret["data"].as_object().unwrap().keys() {
                std::fs::write(dir.join(key), super::secret_value(secret, key)).unwrap();
            }
        }
    }
    // The config, its container paths translated to the folders above; mur is this build's.
    let mut config: Value =
        serde_json::from_str(config_map["data"]["capsule.json"].as_str().unwrap()).unwrap();
    for key in ["manifest", "records_dir", "workdir", "run_dir", "wiring"] {
        let p = config[key].as_str().unwrap().to_owned();
        config[key] = json!(mount(&p));
    }
    config["mur_exe"] = json!(mur_bin());
    let mut args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(args[..2], ["capsule", "--listen"]);
    args[2] = "127.0.0.1:0".into();
    let mut cmd = Command::new(mur_bin());
    cmd.args(&args).env_clear().env("PATH", search_path());
    for e in c["env"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap();
        let value = match e.get("value") {
            Some(v) => v.as_str().unwrap().to_owned(),
            None => {
                assert_eq!(e["valueFrom"]["configMapKeyRef"]["key"], "capsule.json");
                config.to_string()
            }
        };
        let value = match value.starts_with('/') && name != "MURMUR_CAPSULE_CONFIG" {
            true => mount(&value).display().to_string(),
            false => value,
        };
        cmd.env(name, value);
    }
    let mut child = cmd
        .current_dir(&home.work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let port = line
        .trim()
        .strip_prefix("mur capsule: listening on 127.0.0.1:")
        .unwrap_or_else(|| panic!("mur capsule said: {line}"))
        .parse()
        .unwrap();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    });
    Container { child, port }
}

pub fn post(
    port: u16,
    token: Option<&str>,
    extra: &[(&str, &str)],
    method: &str,
    params: Value,
) -> Resp {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json"), ("A2A-Version", "1.0")];
    if let Some(b) = &bearer {
        headers.push(("Authorization", b));
    }
    headers.extend_from_slice(extra);
    http(
        port,
        "POST",
        "/",
        &headers,
        request(json!(1), method, params).as_bytes(),
    )
}
