"""deploy_test: the deployment files (deploy/) against the memoryd they deploy.

Every MEMORYD_* variable and --flag the files name must be one `memoryd
--help` lists (a renamed flag would otherwise be ignored silently), and the
manifests must agree with one another: probe and container ports with the
listen addresses, grace periods with --shutdown-grace, the readiness probe's
service with the API, labels with selectors, kustomization with the files.
"""

import argparse
import configparser
import glob
import os
import re
import subprocess
import sys
import unittest

import yaml

ARGS = None
FLAG_LINE = re.compile(r"^\s+--([a-z0-9-]+)\s+(MEMORYD_[A-Z0-9_]+)\s", re.M)
ENV_NAME = re.compile(r"\bMEMORYD_[A-Z0-9_]+\b")


def memoryd_flags():
    out = subprocess.run([ARGS.memoryd, "--help"], check=True, capture_output=True,
                         text=True).stdout
    flags = dict(FLAG_LINE.findall(out))
    assert len(flags) > 40, out  # the parser reads the help it was written for
    return flags


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def deploy_files():
    files = sorted(glob.glob(os.path.join(ARGS.deploy, "**", "*"), recursive=True))
    return [f for f in files if os.path.isfile(f) and not f.endswith("BUILD")]


def manifests():
    docs = {}
    for path in glob.glob(os.path.join(ARGS.deploy, "kubernetes", "*.yaml")):
        for doc in yaml.safe_load_all(read(path)):
            if doc:
                docs.setdefault(doc["kind"], []).append(doc)
    return docs


def listen_port(addr):
    return int(addr.rsplit(":", 1)[1])


class DeployTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.flags = memoryd_flags()
        cls.envs = set(cls.flags.values())
        cls.docs = manifests()

    def test_every_variable_and_flag_named_exists(self):
        files = deploy_files()
        self.assertGreaterEqual(len(files), 8, files)
        for path in files:
            for name in ENV_NAME.findall(read(path)):
                self.assertIn(name, self.envs, "%s names %s, which memoryd does not read"
                              % (path, name))
        # Flags on memoryd's command lines: the unit's ExecStart and the
        # containers' command and args.
        argv = []
        unit = read(os.path.join(ARGS.deploy, "systemd", "memoryd.service"))
        for line in unit.splitlines():
            if line.startswith("ExecStart="):
                argv += line.split("=", 1)[1].split()
        for c in self.docs["Deployment"][0]["spec"]["template"]["spec"]["containers"]:
            argv += c.get("command", []) + c.get("args", [])
        self.assertTrue(argv)
        for word in argv:
            if word.startswith("--"):
                self.assertIn(word[2:].split("=", 1)[0], self.flags, word)

    def test_the_kubernetes_objects_are_all_there_and_kustomized(self):
        for kind in ("ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget"):
            self.assertIn(kind, self.docs)
        kust = yaml.safe_load(read(os.path.join(ARGS.deploy, "kubernetes", "kustomization.yaml")))
        listed = set(kust["resources"])
        on_disk = {os.path.basename(p)
                   for p in glob.glob(os.path.join(ARGS.deploy, "kubernetes", "*.yaml"))}
        self.assertEqual(on_disk - {"kustomization.yaml"}, listed)

    def test_the_deployment_agrees_with_its_config(self):
        config = self.docs["ConfigMap"][0]["data"]
        for key in config:
            self.assertIn(key, self.envs)
        secret_env = self.docs["Secret"][0]["stringData"]
        for key in secret_env:
            self.assertIn(key, self.envs)
        dep = self.docs["Deployment"][0]
        pod = dep["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        grpc_port = listen_port(config["MEMORYD_LISTEN"])
        self.assertEqual(grpc_port, ports["grpc"])
        self.assertEqual(listen_port(config["MEMORYD_METRICS_LISTEN"]), ports["metrics"])
        self.assertTrue(config["MEMORYD_LISTEN"].startswith("0.0.0.0:"),
                        "a pod must listen beyond loopback")
        # Native gRPC probes on the gRPC port; readiness on a real service.
        services = set()
        for proto in glob.glob(os.path.join(ARGS.protos, "*.proto")):
            services |= {"memory.v1." + s
                         for s in re.findall(r"^service (\w+) \{", read(proto), re.M)}
        self.assertIn("memory.v1.Entries", services)
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            self.assertEqual(grpc_port, c[probe]["grpc"]["port"], probe)
            svc = c[probe]["grpc"].get("service", "")
            self.assertTrue(svc == "" or svc in services, svc)
        # TLS would break kubelet's plaintext gRPC probes.
        self.assertNotIn("MEMORYD_TLS_CERT", config)
        # The kubelet waits longer than memoryd's own drain.
        self.assertGreater(pod["terminationGracePeriodSeconds"],
                           int(config["MEMORYD_SHUTDOWN_GRACE"]))
        # Config and secrets reach the container; key files are mounted
        # where the config says.
        refs = {next(iter(e.values()))["name"] for e in c["envFrom"]}
        self.assertEqual({"memoryd-config", "memoryd-secrets"}, refs)
        mounts = [m["mountPath"] for m in c["volumeMounts"]]
        for key in ("MEMORYD_JWKS", "MEMORYD_SIGNING_KEY"):
            self.assertTrue(any(config[key].startswith(m + "/") for m in mounts), key)
        self.assertTrue(c["securityContext"]["readOnlyRootFilesystem"])
        self.assertFalse(c["securityContext"]["allowPrivilegeEscalation"])

    def test_labels_select_the_pods(self):
        dep = self.docs["Deployment"][0]
        labels = dep["spec"]["template"]["metadata"]["labels"]
        for sel in (dep["spec"]["selector"]["matchLabels"],
                    self.docs["PodDisruptionBudget"][0]["spec"]["selector"]["matchLabels"],
                    *[s["spec"]["selector"] for s in self.docs["Service"]]):
            for k, v in sel.items():
                self.assertEqual(v, labels.get(k))
        pdb = self.docs["PodDisruptionBudget"][0]["spec"]
        self.assertLess(pdb["minAvailable"], dep["spec"]["replicas"])
        for svc in self.docs["Service"]:
            for p in svc["spec"]["ports"]:
                self.assertIn(p["targetPort"], ("grpc", "metrics"))

    def test_the_systemd_unit_is_hardened_and_agrees_with_its_env_file(self):
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        unit.optionxform = str
        unit.read_string(read(os.path.join(ARGS.deploy, "systemd", "memoryd.service")))
        svc = unit["Service"]
        for key, want in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"),
                          ("ProtectHome", "yes"), ("PrivateTmp", "yes"),
                          ("PrivateDevices", "yes"), ("RestrictSUIDSGID", "yes"),
                          ("MemoryDenyWriteExecute", "yes"), ("CapabilityBoundingSet", "")):
            self.assertEqual(want, svc.get(key), key)
        self.assertNotEqual("root", svc.get("User", "root"))
        self.assertEqual("/etc/memoryd/memoryd.env", svc["EnvironmentFile"])
        env = {}
        for line in read(os.path.join(ARGS.deploy, "systemd", "memoryd.env")).splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                k, v = line.split("=", 1)
                env[k] = v
        for k in env:
            self.assertIn(k, self.envs)
        self.assertGreater(int(svc["TimeoutStopSec"]), int(env["MEMORYD_SHUTDOWN_GRACE"]))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--memoryd", required=True)
    p.add_argument("--deploy", required=True)
    p.add_argument("--protos", required=True)
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
