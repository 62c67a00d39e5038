// Offline checks of the operator files in deploy/, run by deploy/local.sh test (check_deploy):
//   node deploy/check-deploy.mjs [--write] [--rendered FILE ...]
// 1. Alerts: each rule of prometheus/rowlock-rules.yml has a runbook_url naming a section of
//    runbooks/alerts.md, and rowlock-rules.test.yml shows it firing and not firing.
// 2. kubernetes/monitoring/prometheusrule.yaml holds exactly those rules (--write regenerates it).
// 3. Every Kubernetes manifest (kustomization resources, rendered here: resources plus labels,
//    and the files outside it) passes the JSON schema of its kind (the kubernetes-models
//    packages, Kubernetes' OpenAPI schemas compiled; unknown fields are not caught, see
//    docs/operations/running.md "Deploying"), and what the schema cannot say: selectors
//    match the pod labels, the startup probe outlasts ROWLOCK_DB_STARTUP_WAIT_S, the example
//    connection string works with the image. --rendered FILE validates a `kubectl kustomize` output as well.
// Needs NODE_PATH (or ROWLOCK_DEPLOY_NODE_MODULES) with kubernetes-models,
// @kubernetes-models/prometheus-operator and yaml: deploy/local.sh installs them.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const here = path.dirname(new URL(import.meta.url).pathname);
const modules = process.env.ROWLOCK_DEPLOY_NODE_MODULES;
if (!modules) {
  console.error("check-deploy: set ROWLOCK_DEPLOY_NODE_MODULES (deploy/local.sh test does)");
  process.exit(2);
}
const load = (p) => import(pathToFileURL(path.join(modules, p)).href);
const YAML = (await load("yaml/dist/index.js")).default;

const failures = [];
const fail = (msg) => failures.push(msg);
const read = (rel) => fs.readFileSync(path.join(here, rel), "utf8");
const docs = (text) => YAML.parseAllDocuments(text).map((d) => d.toJS()).filter((d) => d != null);

// ---- 1. alerts, runbooks, tests ----
const rules = YAML.parse(read("prometheus/rowlock-rules.yml"));
const tests = YAML.parse(read("prometheus/rowlock-rules.test.yml"));
const runbook = read("runbooks/alerts.md");
const anchors = new Set(
  [...runbook.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) =>
    m[1].trim().toLowerCase().replace(/[^\w\- ]/g, "").replace(/ /g, "-")));
const fires = new Set(), quiet = new Set();
for (const t of tests.tests ?? [])
  for (const a of t.alert_rule_test ?? [])
    ((a.exp_alerts ?? []).length > 0 ? fires : quiet).add(a.alertname);
let alerts = 0;
for (const g of rules.groups)
  for (const r of g.rules) {
    if (!r.alert) continue;
    alerts++;
    const url = r.annotations?.runbook_url ?? "";
    const m = url.match(/^deploy\/runbooks\/alerts\.md#(.+)$/);
    if (!m) fail(`${r.alert}: runbook_url "${url}" is not deploy/runbooks/alerts.md#<section>`);
    else if (!anchors.has(m[1])) fail(`${r.alert}: runbooks/alerts.md has no section #${m[1]}`);
    if (!fires.has(r.alert)) fail(`${r.alert}: no promtool test shows it firing`);
    if (!quiet.has(r.alert)) fail(`${r.alert}: no promtool test shows it not firing`);
  }

// ---- 2. the PrometheusRule wraps the same rules ----
const promRulePath = "kubernetes/monitoring/prometheusrule.yaml";
const promRule = {
  apiVersion: "monitoring.coreos.com/v1",
  kind: "PrometheusRule",
  metadata: { name: "rowlock", labels: { "app.kubernetes.io/name": "rowlock" } },
  spec: { groups: rules.groups },
};
const promRuleText =
  "# GENERATED from deploy/prometheus/rowlock-rules.yml by node deploy/check-deploy.mjs --write;\n" +
  "# edit the rules there. Your Prometheus Operator may select rules by a label: add it here.\n" +
  YAML.stringify(promRule, { lineWidth: 0 });
if (process.argv.includes("--write")) fs.writeFileSync(path.join(here, promRulePath), promRuleText);
else if (!fs.existsSync(path.join(here, promRulePath)) || read(promRulePath) !== promRuleText)
  fail(`${promRulePath} differs from prometheus/rowlock-rules.yml: run node deploy/check-deploy.mjs --write`);

// ---- 3. Kubernetes manifests ----
const kinds = {
  "v1/Secret": "kubernetes-models/v1/Secret.js",
  "v1/Service": "kubernetes-models/v1/Service.js",
  "apps/v1/Deployment": "kubernetes-models/apps/v1/Deployment.js",
  "batch/v1/Job": "kubernetes-models/batch/v1/Job.js",
  "policy/v1/PodDisruptionBudget": "kubernetes-models/policy/v1/PodDisruptionBudget.js",
  "networking.k8s.io/v1/NetworkPolicy": "kubernetes-models/networking.k8s.io/v1/NetworkPolicy.js",
  "monitoring.coreos.com/v1/ServiceMonitor":
    "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor.js",
  "monitoring.coreos.com/v1/PrometheusRule":
    "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule.js",
};

// A kustomization as this repository uses it: resources (files) and labels (metadata only).
function render(dir) {
  const k = YAML.parse(read(path.join(dir, "kustomization.yaml")));
  const known = new Set(["apiVersion", "kind", "resources", "labels", "images"]);
  for (const key of Object.keys(k))
    if (!known.has(key)) fail(`${dir}/kustomization.yaml: ${key} is not checked by check-deploy.mjs`);
  const out = [];
  for (const res of k.resources ?? [])
    for (const d of docs(read(path.join(dir, res)))) {
      for (const l of k.labels ?? []) {
        d.metadata.labels = { ...(d.metadata.labels ?? {}), ...l.pairs };
        if (l.includeSelectors) fail(`${dir}: labels with includeSelectors would change selectors`);
      }
      out.push({ file: `${dir}/${res}`, doc: d });
    }
  return out;
}

async function validate(file, d) {
  const key = `${d.apiVersion}/${d.kind}`;
  if (!kinds[key]) return fail(`${file}: no schema for ${key}`);
  const Model = Object.values(await load(kinds[key]))[0];
  try {
    new Model(d).validate();
  } catch (e) {
    fail(`${file}: ${d.kind} ${d.metadata?.name ?? d.metadata?.generateName}: ${e.message}`);
  }
}

const matches = (sel, labels) =>
  Object.entries(sel ?? {}).every(([k, v]) => labels?.[k] === v) && Object.keys(sel ?? {}).length > 0;

function semantics(objs) {
  const deploy = objs.find((o) => o.doc.kind === "Deployment")?.doc;
  if (!deploy) return fail("kubernetes: no Deployment rendered");
  const pod = deploy.spec.template;
  if (!matches(deploy.spec.selector.matchLabels, pod.metadata.labels))
    fail("Deployment: the selector does not match the pod template's labels");
  for (const { doc } of objs) {
    const sel = doc.kind === "Service" ? doc.spec.selector
      : doc.kind === "PodDisruptionBudget" || doc.kind === "NetworkPolicy"
        ? (doc.spec.selector ?? doc.spec.podSelector).matchLabels : null;
    if (sel && !matches(sel, pod.metadata.labels))
      fail(`${doc.kind} ${doc.metadata.name}: its selector does not match the rowlock pods`);
  }
  const c = pod.spec.containers.find((x) => x.name === "rowlock");
  const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
  const wait = Number(env.ROWLOCK_DB_STARTUP_WAIT_S ?? 60);
  const sp = c.startupProbe;
  const budget = (sp?.periodSeconds ?? 10) * (sp?.failureThreshold ?? 3);
  if (!(budget > wait + 30))
    fail(`Deployment: startup probe budget ${budget}s does not outlast ROWLOCK_DB_STARTUP_WAIT_S=${wait}s (+30s)`);
  for (const p of ["startupProbe", "livenessProbe", "readinessProbe"])
    if (c[p]?.httpGet?.path !== "/healthz")
      fail(`Deployment: ${p} must probe /healthz (docs/operations/running.md, "Readiness: /healthz, not /readyz")`);
  if (env.ROWLOCK_MIGRATE !== "check") fail("Deployment: the server should run ROWLOCK_MIGRATE=check");
  const init = pod.spec.initContainers?.find((x) => (x.args ?? []).includes("--migrate-only"));
  if (!init) fail("Deployment: no init container runs --migrate-only");
  const term = pod.spec.terminationGracePeriodSeconds ?? 30;
  if (!(term > 5 + 30)) fail("Deployment: terminationGracePeriodSeconds must exceed preStop + drain");
}

const objs = render("kubernetes");
const monitoring = render("kubernetes/monitoring");
const extra = ["kubernetes/secret.example.yaml", "kubernetes/job-migrate.yaml"].flatMap((f) =>
  docs(read(f)).map((doc) => ({ file: f, doc })));
for (const { file, doc } of [...objs, ...monitoring, ...extra]) await validate(file, doc);
semantics(objs);
const secret = extra.find((o) => o.doc.kind === "Secret").doc;
const url = secret.stringData["database-url"];
if (/sslmode=verify-(ca|full)/.test(url) && !/sslrootcert=/.test(url))
  fail("secret.example.yaml: sslmode=verify-* without sslrootcert cannot verify in the image");
const rendered = process.argv.flatMap((a, i) => (process.argv[i - 1] === "--rendered" ? [a] : []));
for (const f of rendered) for (const d of docs(fs.readFileSync(f, "utf8"))) await validate(f, d);

for (const f of failures) console.error(`check-deploy: ${f}`);
const n = objs.length + monitoring.length + extra.length;
console.error(`check-deploy: ${alerts} alerts, ${n} manifests${rendered.length ? ` (+ ${rendered.join(", ")})` : ""}: ` +
  (failures.length ? `${failures.length} problem(s)` : "all good"));
process.exit(failures.length ? 1 : 0);
