import { randomBytes } from "node:crypto";
import { serviceError } from "../errors/index.ts";
import { KeyedLock, WriteConflict, type Store, type Table, type WriteOp } from "../storage/index.ts";

/** Where a session's calls are served: by this process, or by the replica at `address`. */
export type Route = { here: true } | { here: false; address: string; replica: string };

/**
 * Which process serves each session (docs/operations.md, "Scaling"). The embedded store has one
 * process, which serves them all (`SoloOwnership`); on a shared database each session is owned by
 * one replica at a time under a lease with a fencing token (`LeasedOwnership`).
 */
export interface SessionOwnership {
  /** This process's replica id (a stable name, SERVICE_REPLICA_ID). */
  readonly replica: string;
  /** Whether sessions may be owned elsewhere (several replicas share the store). */
  readonly shared: boolean;
  /**
   * Where the session is served. When its lease is free or expired (its owner died), this
   * process takes it over first, and the takeover's recovery has run when this resolves.
   */
  route(sessionId: string): Promise<Route>;
  /** Claims a session this process creates. */
  claim(sessionId: string): Promise<void>;
  /** The conditions that fence a write of the session: it applies only while this process owns it. */
  fence(sessionId: string): WriteOp[];
  /** After a fenced write conflicted: whether the session changed owner (then this process forgets it). */
  lost(sessionId: string): Promise<boolean>;
  /** Drops the lease of a session that is gone (deleted). */
  release(sessionId: string): Promise<void>;
  /** Whether the replica's lease is current (a call forwarded to it is given up once not). */
  ownerAlive(replica: string): Promise<boolean>;
  /** SERVICE_SESSION_LEASE_SECS, in milliseconds. */
  readonly leaseMs: number;
  close(): Promise<void>;
}

/** The embedded default: one process owns every session and nothing is fenced. */
export class SoloOwnership implements SessionOwnership {
  readonly shared = false;
  readonly replica: string;

  constructor(replica: string) {
    this.replica = replica;
  }

  async route(): Promise<Route> {
    return { here: true };
  }

  async claim(): Promise<void> {}

  fence(): WriteOp[] {
    return [];
  }

  async lost(): Promise<boolean> {
    return false;
  }

  async release(): Promise<void> {}

  async ownerAlive(): Promise<boolean> {
    return true;
  }

  readonly leaseMs = 0;

  async close(): Promise<void> {}
}

/** A session's owner: the replica and process (one start of it) that serve it, and its fencing token. */
interface Owner {
  replica: string;
  incarnation: string;
  token: number;
}

/** A replica's lease: where it is reached, which start of it runs, and until when it is alive. */
interface ReplicaLease {
  address: string;
  incarnation: string;
  /** Milliseconds since the epoch, by the replica's clock. */
  expiresAt: number;
}

/** Told when this process takes a session over (recover it before serving) or loses it (forget what it held). */
export interface OwnershipListener {
  /** Whether the session exists: one that does not is not taken over (its calls are answered not found here). */
  exists(sessionId: string): Promise<boolean>;
  takenOver(sessionId: string, previous: Owner | undefined): Promise<void>;
  lost(sessionId: string): void;
}

export interface LeasedOwnershipOptions {
  store: Store;
  replica: string;
  /** How other replicas reach this one (SERVICE_REPLICA_ADDRESS, or the listener's URL). */
  address: string;
  /** SERVICE_SESSION_LEASE_SECS. */
  leaseSecs: number;
}

/**
 * Sessions owned under leases in the shared database (docs/operations.md, "Scaling"). Each
 * replica holds one lease, its row in `replicas` (address, which start of it runs, expiry),
 * renewed every third of SERVICE_SESSION_LEASE_SECS; each session has an owner row naming a
 * replica's start and a fencing token. A session's lease is its owner's: while the owner's
 * lease is current, calls are forwarded to it; once it expired (the owner died, paused or lost
 * the database) the next replica that needs the session takes it over with one conditional
 * write of the owner row, the token one higher, so replicas racing for it agree on one winner.
 * Every journal write of the session expects the owner row as this process wrote it, in the same
 * transaction (`fence`): once another replica has taken the session over, the old owner can
 * never append again, whatever its clock says. One lease per replica, not per session, so idle
 * and ended sessions cost no renewals.
 */
export class LeasedOwnership implements SessionOwnership {
  readonly shared = true;
  readonly replica: string;
  readonly #incarnation = randomBytes(8).toString("hex");
  readonly #options: LeasedOwnershipOptions;
  readonly #owners: Table<Owner>;
  readonly #replicas: Table<ReplicaLease>;
  /** Sessions this process owns, with their owner row as written. */
  readonly #held = new Map<string, Owner>();
  /** Sessions taken over whose recovery is still running: their journal writes are fenced, their calls wait. */
  readonly #recovering = new Set<string>();
  readonly #lock = new KeyedLock();
  #lease: ReplicaLease | undefined;
  #listener: OwnershipListener | undefined;
  #renewer: NodeJS.Timeout | undefined;
  #sweeper: NodeJS.Timeout | undefined;

  constructor(options: LeasedOwnershipOptions) {
    this.#options = options;
    this.replica = options.replica;
    this.#owners = options.store.table<Owner>("session-owners");
    this.#replicas = options.store.table<ReplicaLease>("replicas");
  }

  /** Takes this replica's lease and keeps it renewed; `listener` recovers the sessions taken over. */
  async start(listener: OwnershipListener): Promise<void> {
    this.#listener = listener;
    const lease = this.#renewal();
    await this.#replicas.put(this.replica, lease);
    this.#lease = lease;
    this.#renewer = setInterval(() => void this.#renew().catch(() => undefined), (this.#options.leaseSecs * 1000) / 3);
    this.#renewer.unref();
  }

  async route(sessionId: string): Promise<Route> {
    // A session being taken over is served once its recovery is done (the lock is held meanwhile).
    if (this.#held.has(sessionId) && !this.#recovering.has(sessionId)) return { here: true };
    return this.#lock.run(sessionId, async () => {
      for (;;) {
        if (this.#held.has(sessionId)) return { here: true };
        const owner = await this.#owners.get(sessionId);
        if (!owner && !(await this.#listener?.exists(sessionId))) return { here: true };
        const lease = owner && (await this.#alive(owner));
        if (owner && lease) return { here: false, address: lease.address, replica: owner.replica };
        try {
          await this.#takeOver(sessionId, owner);
          return { here: true };
        } catch (error) {
          // Another replica took it first: route to it.
          if (!(error instanceof WriteConflict)) throw error;
        }
      }
    });
  }

  async claim(sessionId: string): Promise<void> {
    const owner = this.#owner(1);
    await this.#options.store.write([this.#owners.expectOp(sessionId, undefined), this.#owners.putOp(sessionId, owner)]);
    this.#held.set(sessionId, owner);
  }

  fence(sessionId: string): WriteOp[] {
    const owner = this.#held.get(sessionId);
    if (!owner) throw serviceError("session_moved", `session ${sessionId} is served by another replica now; retry the call`);
    return [this.#owners.expectOp(sessionId, owner)];
  }

  async lost(sessionId: string): Promise<boolean> {
    const held = this.#held.get(sessionId);
    const owner = await this.#owners.get(sessionId);
    if (held && owner && sameOwner(owner, held)) return false;
    this.#lose(sessionId);
    return true;
  }

  async release(sessionId: string): Promise<void> {
    const owner = this.#held.get(sessionId);
    if (!owner) return;
    this.#held.delete(sessionId);
    await this.#options.store.write([this.#owners.expectOp(sessionId, owner), this.#owners.deleteOp(sessionId)]);
  }

  async ownerAlive(replica: string): Promise<boolean> {
    const lease = await this.#replicas.get(replica);
    return lease !== undefined && lease.expiresAt > Date.now();
  }

  get leaseMs(): number {
    return this.#options.leaseSecs * 1000;
  }

  /** Stops renewing and gives the lease up, so that other replicas take this one's sessions over at once. */
  async close(): Promise<void> {
    clearInterval(this.#renewer);
    clearInterval(this.#sweeper);
    this.#held.clear();
    const lease = this.#lease;
    if (lease) await this.#options.store.write([this.#replicas.expectOp(this.replica, lease), this.#replicas.deleteOp(this.replica)]).catch(() => undefined);
  }

  /**
   * Takes over, now and every lease period, the sessions with work left (`unfinished`: operations
   * in flight, a run running, an ending) whose owner is not alive, so that their work is recovered
   * (runs resume) without waiting for a call.
   */
  startSweeping(unfinished: () => Promise<Iterable<string>>): void {
    const sweep = async () => {
      for (const sessionId of await this.#orphaned(await unfinished())) await this.route(sessionId).catch(() => undefined);
    };
    let running = sweep().catch(() => undefined);
    this.#sweeper = setInterval(() => {
      running = running.then(() => sweep().catch(() => undefined));
    }, this.#options.leaseSecs * 1000);
    this.#sweeper.unref();
  }

  /**
   * Of `sessions` (sessions with work left: operations in flight, a run running, an ending), those
   * whose owner is not alive: the sweep takes them over so that their work is recovered without a call.
   */
  async #orphaned(sessions: Iterable<string>): Promise<string[]> {
    const orphans: string[] = [];
    for (const sessionId of sessions) {
      if (this.#held.has(sessionId)) continue;
      const owner = await this.#owners.get(sessionId);
      if (!owner || !(await this.#alive(owner))) orphans.push(sessionId);
    }
    return orphans;
  }

  /** The owner's lease while it is current: the same start of the replica, not expired. */
  async #alive(owner: Owner): Promise<ReplicaLease | undefined> {
    if (owner.replica === this.replica) return undefined;
    const lease = await this.#replicas.get(owner.replica);
    if (!lease || lease.incarnation !== owner.incarnation || lease.expiresAt <= Date.now()) return undefined;
    return lease;
  }

  async #takeOver(sessionId: string, previous: Owner | undefined): Promise<void> {
    const owner = this.#owner((previous?.token ?? 0) + 1);
    await this.#options.store.write([this.#owners.expectOp(sessionId, previous), this.#owners.putOp(sessionId, owner)]);
    this.#held.set(sessionId, owner);
    this.#recovering.add(sessionId);
    try {
      await this.#listener?.takenOver(sessionId, previous);
    } catch (error) {
      // Recovery failed (storage): the next call starts it again, here or elsewhere.
      this.#held.delete(sessionId);
      await this.#options.store
        .write([this.#owners.expectOp(sessionId, owner), this.#owners.putOp(sessionId, { ...owner, incarnation: "" })])
        .catch(() => undefined);
      throw error;
    }
  }

  /**
   * Renews this replica's lease. A renewal that comes after the lease ran out (the process was
   * paused, or could not reach the database) checks every session it held: those taken over
   * meanwhile are lost. A lease another start of this replica id wrote means this process is
   * stale: it loses everything.
   */
  async #renew(): Promise<void> {
    const previous = this.#lease!;
    const lease = this.#renewal();
    try {
      await this.#options.store.write([this.#replicas.expectOp(this.replica, previous), this.#replicas.putOp(this.replica, lease)]);
    } catch (error) {
      if (!(error instanceof WriteConflict)) throw error;
      for (const sessionId of [...this.#held.keys()]) this.#lose(sessionId);
      clearInterval(this.#renewer);
      return;
    }
    this.#lease = lease;
    if (previous.expiresAt <= Date.now()) for (const sessionId of [...this.#held.keys()]) await this.lost(sessionId);
  }

  #lose(sessionId: string): void {
    if (!this.#held.delete(sessionId)) return;
    this.#listener?.lost(sessionId);
  }

  #owner(token: number): Owner {
    return { replica: this.replica, incarnation: this.#incarnation, token };
  }

  #renewal(): ReplicaLease {
    return { address: this.#options.address, incarnation: this.#incarnation, expiresAt: Date.now() + this.#options.leaseSecs * 1000 };
  }
}

function sameOwner(a: Owner, b: Owner): boolean {
  return a.replica === b.replica && a.incarnation === b.incarnation && a.token === b.token;
}
