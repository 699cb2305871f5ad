// Static checks of the deployment files: the Dockerfile, .dockerignore, infra/docker-compose.yml
// (the whole stack), infra/monitoring-host.yml and the Prometheus and Grafana files they mount.
// What a tool can check without a container engine: the Dockerfile passes dockerfile-utils'
// validator; every file it copies exists and is not left out of the build context; its CMD runs
// a script that exists and a command main.ts knows; pnpm and Node versions agree with
// package.json; every compose service has an image or a build context that exists; every host
// path mounted exists; every variable set for openplane or the AppView is one their code (or
// the stock AppView's) reads, and the values pass the same validation the process runs at start;
// depends_on names services that exist (and have a health check when waited on for health);
// Prometheus scrapes services and ports that exist; published ports stay on loopback.
//
// NOT checked here: the image is not built (the roaring addon's compile, the apt and npm
// downloads, `pnpm install --prod` inside it), compose is not run, no image is pulled, no health
// check is executed, Prometheus and Grafana do not load their files, and nothing is reached
// over a network. `pnpm exec vitest run tests/e2e/start-appview.test.ts` runs the same
// `openplane appview` command (both modes) as a process, without containers.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { DockerfileParser, type Dockerfile } from 'dockerfile-ast'
import { validate } from 'dockerfile-utils'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { readAppViewSettings } from '../../packages/cli/src/appview.ts'
import { readConfig } from '../../packages/cli/src/config.ts'
import { stockPackageDir } from '../../scripts/stock-contract.ts'

const root = path.resolve(import.meta.dirname, '../..')
const infra = path.join(root, 'infra')
const read = (file: string) => readFileSync(path.join(root, file), 'utf8')

// ---- shapes of what the YAML holds, checked as they are read -----------------------------

type Yaml = Record<string, unknown>

function record(v: unknown, where: string): Yaml {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new Error(`${where}: expected a mapping, got ${JSON.stringify(v)}`)
  }
  return v as Yaml
}

function strings(v: unknown, where: string): string[] {
  if (v === undefined) return []
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) {
    throw new Error(`${where}: expected a list of strings, got ${JSON.stringify(v)}`)
  }
  return v
}

/** `environment:` as a mapping or a list of NAME=value. */
function environment(v: unknown, where: string): Record<string, string> {
  if (v === undefined) return {}
  if (Array.isArray(v)) {
    return Object.fromEntries(
      strings(v, where).map((s) => [s.split('=')[0]!, s.slice(s.indexOf('=') + 1)]),
    )
  }
  return Object.fromEntries(Object.entries(record(v, where)).map(([k, x]) => [k, String(x)]))
}

/**
 * Compose's interpolation with nothing set in the shell: `${NAME:-default}` and `${NAME-default}`
 * give the default, `${NAME}` gives an empty string, `$$` a dollar. What the file runs with when
 * a newcomer sets nothing.
 */
function interpolate(s: string): string {
  return s
    .replace(
      /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g,
      (_m, _name, dflt?: string) => dflt ?? '',
    )
    .replace(/\$\$/g, '$')
}

interface Service {
  name: string
  image?: string
  build?: { context: string; dockerfile: string }
  command: string[]
  env: Record<string, string>
  volumes: string[]
  ports: string[]
  dependsOn: Record<string, string>
  healthcheck?: string[]
  extraHosts: string[]
  hostNetwork: boolean
}

function services(file: string): { services: Map<string, Service>; volumes: Set<string> } {
  const doc = record(parse(readFileSync(file, 'utf8')), file)
  const out = new Map<string, Service>()
  for (const [name, raw] of Object.entries(record(doc.services, `${file} services`))) {
    const s = record(raw, `service ${name}`)
    const build =
      s.build === undefined
        ? undefined
        : typeof s.build === 'string'
          ? { context: s.build, dockerfile: 'Dockerfile' }
          : {
              context: String(record(s.build, `${name}.build`).context ?? '.'),
              dockerfile: String(record(s.build, `${name}.build`).dockerfile ?? 'Dockerfile'),
            }
    const deps = Array.isArray(s.depends_on)
      ? Object.fromEntries(strings(s.depends_on, `${name}.depends_on`).map((d) => [d, 'started']))
      : Object.fromEntries(
          Object.entries(record(s.depends_on ?? {}, `${name}.depends_on`)).map(([d, c]) => [
            d,
            String(record(c, `${name}.depends_on.${d}`).condition ?? 'service_started'),
          ]),
        )
    const hc =
      s.healthcheck === undefined ? undefined : record(s.healthcheck, `${name}.healthcheck`)
    out.set(name, {
      name,
      image: typeof s.image === 'string' ? s.image : undefined,
      build,
      command: strings(s.command, `${name}.command`),
      env: Object.fromEntries(
        Object.entries(environment(s.environment, `${name}.environment`)).map(([k, v]) => [
          k,
          interpolate(v),
        ]),
      ),
      volumes: strings(s.volumes, `${name}.volumes`),
      ports: strings(s.ports, `${name}.ports`),
      dependsOn: deps,
      healthcheck: hc ? strings(hc.test, `${name}.healthcheck.test`) : undefined,
      extraHosts: strings(s.extra_hosts, `${name}.extra_hosts`),
      hostNetwork: s.network_mode === 'host',
    })
  }
  const volumes = new Set(Object.keys(record(doc.volumes ?? {}, `${file} volumes`)))
  return { services: out, volumes }
}

/** A volume entry's source: a host path (relative to the compose file) or a named volume. */
function mountSource(entry: string): { hostPath?: string; named?: string; target: string } {
  const [source, target] = entry.split(':')
  if (!source || !target) throw new Error(`volume entry without source:target: ${entry}`)
  if (/^[./~]/.test(source)) return { hostPath: source, target }
  return { named: source, target }
}

/** Container ports a service publishes or exposes (`[ip:]host:container[/proto]`). */
function containerPorts(s: Service): number[] {
  return s.ports.map((p) => Number(p.split('/')[0]!.split(':').at(-1)))
}

// ---- the Dockerfile ----------------------------------------------------------------------

const dockerfileText = read('Dockerfile')
const dockerfile: Dockerfile = DockerfileParser.parse(dockerfileText)
const args = (i: { getArguments(): { getValue(): string }[] }) =>
  i.getArguments().map((a) => a.getValue())

/** .dockerignore as Docker reads it: the last pattern matching a path (or a parent) decides. */
function dockerignored(): (file: string) => boolean {
  const rules = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!')
      const pattern = path.posix.normalize((negate ? l.slice(1) : l).replace(/^\/+/, ''))
      const re = pattern
        .split('**/')
        .map((part) =>
          part
            .replace(/[.+^${}()|[\]\\]/g, '\\$&')
            .replace(/\*/g, '[^/]*')
            .replace(/\?/g, '[^/]'),
        )
        .join('(?:.*/)?')
      return { negate, re: new RegExp(`^${re}$`) }
    })
  return (file) => {
    const parts = path.posix.normalize(file).split('/')
    const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'))
    let ignored = false
    for (const r of rules) if (prefixes.some((p) => r.re.test(p))) ignored = !r.negate
    return ignored
  }
}

/** The commands main.ts's usage names (what it dispatches to). */
const mainCommands = [...read('packages/cli/src/main.ts').matchAll(/^ {2}([a-z]+) {2,}/gm)].map(
  (m) => m[1]!,
)

/** `node [flags] <script.ts> <command> ...`: the script and the command. */
function nodeCommand(argv: string[]): { script: string; command: string | undefined } {
  expect(argv[0]).toBe('node')
  const i = argv.findIndex((a) => a.endsWith('.ts'))
  expect(i, `no .ts script in ${JSON.stringify(argv)}`).toBeGreaterThan(0)
  return { script: argv[i]!, command: argv[i + 1] }
}

describe('Dockerfile', () => {
  it('passes dockerfile-utils validation', () => {
    expect(validate(dockerfileText)).toEqual([])
  })

  it('copies only files that exist and that .dockerignore leaves in the context', () => {
    const ignored = dockerignored()
    const copies = dockerfile.getCOPYs().filter((c) => !c.getFromFlag())
    expect(copies.length).toBeGreaterThan(0)
    for (const c of copies) {
      const sources = args(c).slice(0, -1)
      for (const src of sources) {
        expect(existsSync(path.join(root, src)), `COPY ${src}`).toBe(true)
        expect(ignored(src), `COPY ${src} is excluded by .dockerignore`).toBe(false)
        // Everything tracked under a copied directory reaches the image.
        if (statSync(path.join(root, src)).isDirectory()) {
          const tracked = execFileSync('git', ['ls-files', src], { cwd: root, encoding: 'utf8' })
            .split('\n')
            .filter(Boolean)
          expect(tracked.length).toBeGreaterThan(0)
          expect(tracked.filter(ignored)).toEqual([])
        }
      }
    }
    // Host dependencies never enter the context: they are built inside the image.
    expect(ignored('node_modules/roaring/index.js')).toBe(true)
    expect(ignored('packages/graph/node_modules/roaring/index.js')).toBe(true)
    expect(ignored('.data/postgres/PG_VERSION')).toBe(true)
  })

  it('runs `openplane start` from a script that exists, as a user who is not root', () => {
    const cmds = dockerfile.getCMDs()
    expect(cmds).toHaveLength(1)
    const argv = cmds[0]!.getJSONStrings().map((j) => j.getJSONValue())
    const { script, command } = nodeCommand(argv)
    expect(existsSync(path.join(root, script)), script).toBe(true)
    expect(command).toBe('start')
    expect(mainCommands).toContain(command)
    const users = dockerfile.getInstructions().filter((i) => i.getKeyword() === 'USER')
    expect(users.length).toBeGreaterThan(0)
    expect(args(users.at(-1)!)[0]).not.toMatch(/^(root|0)(:|$)/)
  })

  it('exposes both ports and checks the dataplane on /_live', () => {
    const exposed = dockerfile
      .getInstructions()
      .filter((i) => i.getKeyword() === 'EXPOSE')
      .flatMap(args)
    expect(exposed).toEqual(expect.arrayContaining(['2585', '2584']))
    expect(readConfig({}).port).toBe(2585)
    const hc = dockerfile.getHEALTHCHECKs()
    expect(hc).toHaveLength(1)
    expect(hc[0]!.getArgumentsContent()).toContain('/_live')
    const probe = hc[0]!.getArgumentsContent() ?? ''
    expect(probe).toContain('DATAPLANE_OPS_PORT || process.env.DATAPLANE_PORT || 2585')
    // Both are what the configuration reads for those endpoints' port.
    for (const name of ['DATAPLANE_OPS_PORT', 'DATAPLANE_PORT']) {
      expect(configVariables()).toContain(name)
    }
  })

  it('builds on Node 22 with the pinned pnpm and the lockfile as committed', () => {
    const pkg = JSON.parse(read('package.json')) as { packageManager: string; engines: Yaml }
    const initial = dockerfile.getInitialARGs().map((a) => a.getProperty())
    const image = initial.find((p) => p?.getName() === 'NODE_IMAGE')?.getValue()
    expect(image).toMatch(/^node:22(\.\d+)*-[a-z]+-slim$/)
    for (const from of dockerfile.getFROMs()) expect(from.getImage()).toBe('${NODE_IMAGE}')
    // engines.node is >=22.18: the floating 22 tag is the newest 22, which strips types.
    expect(pkg.engines.node).toBe('>=22.18')
    const runs = dockerfile
      .getInstructions()
      .filter((i) => i.getKeyword() === 'RUN')
      .map((i) => i.getArgumentsContent() ?? '')
    expect(runs.join('\n')).toContain(`npm install -g ${pkg.packageManager}`)
    const install = runs.find((r) => r.startsWith('pnpm install'))
    expect(install).toContain('--frozen-lockfile')
    expect(install).toContain('--prod')
    // The roaring addon may compile: the build stage has the tools.
    expect(runs.join('\n')).toMatch(/python3.*make.*g\+\+/)
  })

  it('sets only variables the configuration reads', () => {
    const readByConfig = configVariables()
    for (const env of dockerfile.getENVs()) {
      for (const p of env.getProperties()) {
        const name = p.getName()
        if (name === 'NODE_ENV') continue
        expect(readByConfig, `ENV ${name}`).toContain(name)
      }
    }
  })
})

// ---- compose -----------------------------------------------------------------------------

/** DATAPLANE_* and DB_* names packages/cli/src/config.ts reads. */
function configVariables(): Set<string> {
  return new Set(read('packages/cli/src/config.ts').match(/\b(?:DATAPLANE|DB)_[A-Z0-9_]+\b/g))
}

/** Every variable some code of the process reads, with where to look for it. */
async function readers(): Promise<(name: string) => boolean> {
  const config = configVariables()
  const appviewSource = read('packages/cli/src/appview.ts')
  const appview = new Set(appviewSource.match(/\bAPPVIEW_[A-Z0-9_]+\b/g))
  const bskyDir = await stockPackageDir()
  // The stock AppView reads its own variables (BSKY_*, MOD_SERVICE_DID) in ServerConfig.readEnv.
  const stock = readFileSync(path.join(bskyDir, 'dist/config.js'), 'utf8')
  // LOG_ENABLED: the stock AppView's logger, in @atproto/common.
  const common = createRequire(path.join(bskyDir, 'package.json')).resolve('@atproto/common')
  const stockLogger = readFileSync(path.join(path.dirname(common), 'logger.js'), 'utf8')
  const telemetry = read('packages/telemetry/src/logger.ts')
  return (name) => {
    if (/^(DATAPLANE|DB)_/.test(name)) return config.has(name)
    if (name.startsWith('APPVIEW_')) return appview.has(name)
    if (name.startsWith('BSKY_') || name === 'MOD_SERVICE_DID') {
      // BSKY_SERVICE_SIGNING_KEY is the stock entry point's, which `openplane appview` replaces.
      return stock.includes(`process.env.${name}`) || appviewSource.includes(`env.${name}?`)
    }
    if (name === 'LOG_LEVEL') return telemetry.includes('process.env.LOG_LEVEL')
    if (name === 'LOG_ENABLED') return stockLogger.includes('process.env.LOG_ENABLED')
    return false
  }
}

const OUR_IMAGE = 'openplane:local'

/** What a container of our image starts with: the Dockerfile's ENV, then the service's. */
function envIn(s: Service): Record<string, string> {
  const image = Object.fromEntries(
    dockerfile
      .getENVs()
      .flatMap((e) => e.getProperties().map((p) => [p.getName(), p.getValue() ?? ''])),
  )
  return { ...image, ...s.env }
}

describe.each([
  ['infra/docker-compose.yml', 'the whole stack'],
  ['infra/monitoring-host.yml', 'monitoring on the host network'],
])('%s (%s)', (file) => {
  const composeFile = path.join(root, file)
  const dir = path.dirname(composeFile)
  const { services: svc, volumes } = services(composeFile)

  it('gives every service an image or a build context that exists', () => {
    expect(svc.size).toBeGreaterThan(0)
    for (const s of svc.values()) {
      expect(s.image ?? s.build, `${s.name}: no image nor build`).toBeDefined()
      if (s.build) {
        const context = path.resolve(dir, s.build.context)
        expect(existsSync(context), `${s.name}: context ${context}`).toBe(true)
        expect(existsSync(path.join(context, s.build.dockerfile)), `${s.name}: dockerfile`).toBe(
          true,
        )
        expect(context).toBe(root)
      }
      // Third-party images are pinned to a version, not `latest`.
      if (s.image && s.image !== OUR_IMAGE) expect(s.image, s.name).toMatch(/:[^:]*\d[^:]*$/)
    }
  })

  it('mounts host paths that exist and named volumes that are declared', () => {
    for (const s of svc.values()) {
      for (const v of s.volumes) {
        const m = mountSource(v)
        if (m.hostPath) {
          expect(existsSync(path.resolve(dir, m.hostPath)), `${s.name}: ${v}`).toBe(true)
        } else {
          expect(volumes, `${s.name}: volume ${m.named}`).toContain(m.named)
        }
      }
    }
  })

  it('waits only on services that exist, for health only where a check is defined', () => {
    for (const s of svc.values()) {
      for (const [dep, condition] of Object.entries(s.dependsOn)) {
        const target = svc.get(dep)
        expect(target, `${s.name} depends on ${dep}`).toBeDefined()
        if (condition === 'service_healthy') {
          // A check of its own, or the image's HEALTHCHECK when built from our Dockerfile.
          const checked = target!.healthcheck || target!.build || target!.image === OUR_IMAGE
          expect(checked, `${dep} has no health check`).toBeTruthy()
        }
      }
    }
  })

  it('publishes ports on loopback only', () => {
    for (const s of svc.values()) {
      for (const p of s.ports) expect(p, s.name).toMatch(/^127\.0\.0\.1:\d+:\d+$/)
    }
  })

  it('sets only variables the processes read, with values they accept', async () => {
    const isRead = await readers()
    for (const s of svc.values()) {
      if (s.image !== OUR_IMAGE) continue
      for (const name of Object.keys(s.env)) {
        expect(isRead(name), `${s.name}: ${name} is read by nothing`).toBe(true)
      }
      // The validation the process runs at start, on what it gets when nothing else is set.
      const config = readConfig(envIn(s))
      const { script, command } = nodeCommand(s.command)
      expect(existsSync(path.join(root, script)), `${s.name}: ${script}`).toBe(true)
      expect(mainCommands, `${s.name}: ${command}`).toContain(command)
      const rest = s.command.slice(s.command.indexOf(script) + 2)
      if (command === 'appview') readAppViewSettings(envIn(s), config, rest)
    }
  })

  const grafana = [...svc.values()].find((s) => s.image?.startsWith('grafana/grafana:'))
  const prometheus = [...svc.values()].find((s) => s.image?.startsWith('prom/prometheus:'))

  it('lets Grafana find Prometheus', () => {
    const datasource = readFileSync(
      path.join(infra, 'grafana/provisioning/datasources/prometheus.yml'),
      'utf8',
    )
    expect(datasource).toContain('${PROMETHEUS_URL}')
    expect(grafana && prometheus).toBeTruthy()
    const url = new URL(grafana!.env.PROMETHEUS_URL ?? '')
    if (grafana!.hostNetwork) {
      // Both on the host's network: Prometheus's own port on loopback.
      expect(prometheus!.hostNetwork).toBe(true)
      expect(url.host).toBe('127.0.0.1:9090')
    } else {
      // On the compose network: the service's name, on the port it listens on.
      expect(url.hostname).toBe(prometheus!.name)
      expect(containerPorts(prometheus!)).toContain(Number(url.port))
    }
  })

  it('has Prometheus scrape services and ports that exist', () => {
    const mount = prometheus!.volumes
      .map(mountSource)
      .find((m) => m.target === '/etc/prometheus/prometheus.yml')
    expect(mount?.hostPath).toBeDefined()
    const scrape = record(parse(readFileSync(path.resolve(dir, mount!.hostPath!), 'utf8')), 'p')
    const hostAliases = prometheus!.extraHosts.map((h) => h.split(':')[0])
    const jobs = (scrape.scrape_configs as unknown[]).map((j) => record(j, 'scrape job'))
    const targets = new Map(
      jobs.flatMap((job) =>
        (job.static_configs as unknown[]).flatMap((c) =>
          strings(record(c, 'static_config').targets, 'targets').map((t) => [t, job.job_name]),
        ),
      ),
    )
    const openplane = svc.get('openplane')
    const dataplanePort = readConfig(openplane ? envIn(openplane) : {}).port
    for (const [t, job] of targets) {
      const [host, port] = t.split(':')
      if (prometheus!.hostNetwork) {
        // openplane and the simulation runner on the host.
        expect(host, t).toBe('127.0.0.1')
        if (job === 'openplane') expect(Number(port)).toBe(dataplanePort)
        continue
      }
      if (hostAliases.includes(host)) continue // a process on the host (the simulation runner)
      const target = svc.get(host!)
      expect(target, `scrape target ${t}`).toBeDefined()
      const listens = new Set(containerPorts(target!))
      if (target!.image === OUR_IMAGE) listens.add(readConfig(envIn(target!)).port)
      expect([...listens], `scrape target ${t}`).toContain(Number(port))
    }
    expect(
      targets.get(prometheus!.hostNetwork ? `127.0.0.1:${dataplanePort}` : 'openplane:2585'),
    ).toBe('openplane')
  })
})

describe('infra/openplane.env.example', () => {
  const lines = read('infra/openplane.env.example').split('\n')
  const set = lines.map((l) => /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(l)).filter((m) => m !== null)
  const commented = lines.map((l) => /^# ([A-Z][A-Z0-9_]*)=/.exec(l)).filter((m) => m !== null)

  it('names only variables the processes read, with values they accept', async () => {
    const isRead = await readers()
    for (const m of [...set, ...commented]) expect(isRead(m[1]!), m[1]).toBe(true)
    expect(set.length).toBeGreaterThan(0)
    readConfig(Object.fromEntries(set.map((m) => [m[1]!, m[2]!])))
  })
})

describe('the whole stack', () => {
  const { services: svc } = services(path.join(infra, 'docker-compose.yml'))

  it('runs openplane and the AppView alone against it, from one image', () => {
    const openplane = svc.get('openplane')!
    const appview = svc.get('appview')!
    expect(nodeCommand(openplane.command).command).toBe('start')
    expect(nodeCommand(appview.command).command).toBe('appview')
    for (const s of [openplane, appview]) expect(s.image).toBe(OUR_IMAGE)
    const config = readConfig(envIn(openplane))
    expect(config.host).toBe('0.0.0.0')
    expect(config.postgres?.url).toMatch(/@postgres:5432\//)
    expect(config.timelines.store).toBe('redis')
    expect(config.timelines.redisNodes).toEqual([{ host: 'redis', port: 6379 }])
    expect(config.firehoseUrls).toEqual(['wss://bsky.network'])
    // The AppView's dataplane is the openplane service, on the port it listens on.
    const settings = readAppViewSettings(envIn(appview), readConfig(envIn(appview)), [])
    expect(settings.dataplaneUrls).toEqual([`http://openplane:${config.port}`])
    expect(settings.signingKey).toEqual({ file: expect.stringMatching(/^\/data\//) })
    expect(appview.volumes.map((v) => mountSource(v).target)).toContain('/data')
    expect(appview.healthcheck?.join(' ')).toContain(`:${settings.port}/xrpc/_health`)
    expect(containerPorts(appview)).toContain(settings.port)
  })
})
