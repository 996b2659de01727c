import {
  hostEnv,
  tool,
  type HostConnection,
  type HostEnvironmentDefinition,
  type HostToolContext,
  type HostToolHandler,
  type Session,
  type ToolPlacement,
} from "@skillenv/client/web";

/**
 * This tab as a host environment: the tools it serves, the sessions it serves them to, what
 * each call did, and the questions waiting for the person at the keyboard.
 */

interface BrowserTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  // biome-ignore lint/suspicious/noExplicitAny: the model's input, checked by the handler against its own inputSchema
  handler(input: any, context: HostToolContext, host: BrowserHost): unknown;
}

/** The tools every console tab serves. Each runs in the page, with what a page can reach. */
export const BROWSER_TOOLS: readonly BrowserTool[] = [
  {
    name: "browser_time",
    description: "The current date and time where the user is: ISO 8601, local time, time zone and locale.",
    inputSchema: { type: "object", properties: {} },
    handler: () => {
      const now = new Date();
      const { timeZone, locale } = Intl.DateTimeFormat().resolvedOptions();
      return { iso: now.toISOString(), local: now.toLocaleString(locale), timeZone, locale };
    },
  },
  {
    name: "page_title",
    description: "The title of the web page the user has open.",
    inputSchema: { type: "object", properties: {} },
    handler: () => ({ title: document.title }),
  },
  {
    name: "ask_user",
    description: "Asks the user a question and waits for the answer they type.",
    inputSchema: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    handler: (input: { question?: unknown }, context, host) => host.ask(String(input.question ?? ""), context),
  },
];

/** One call of a served tool, for the activity list. */
export interface Activity {
  operationId: string;
  sessionId: string;
  tool: string;
  input: unknown;
  startedAt: Date;
  state: "running" | "returned" | "failed";
  output: unknown;
}

/** A question from ask_user, waiting for an answer. */
export interface Question {
  operationId: string;
  sessionId: string;
  text: string;
  answer(text: string): void;
  decline(): void;
}

export interface Served {
  sessionId: string;
  environment: string;
  connection: HostConnection;
}

/** What the page remembers of past calls; older ones drop off. */
const ACTIVITY_KEPT = 50;

export class BrowserHost {
  readonly #definitions = new Map<string, HostEnvironmentDefinition>();
  readonly #served = new Map<string, Served>();
  readonly #questions: Question[] = [];
  readonly #activity: Activity[] = [];
  readonly #listeners = new Set<() => void>();

  get served(): readonly Served[] {
    return [...this.#served.values()];
  }

  get questions(): readonly Question[] {
    return this.#questions;
  }

  /** Newest first. */
  get activity(): readonly Activity[] {
    return this.#activity;
  }

  /** Calls `listener` after every change; answers the function that stops it. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The host environment named `environment` with this tab's tools, one definition per name. */
  definition(environment: string): HostEnvironmentDefinition {
    let definition = this.#definitions.get(environment);
    if (!definition) {
      const tools = Object.fromEntries(BROWSER_TOOLS.map((browserTool) => [browserTool.name, this.#handler(browserTool)]));
      definition = hostEnv({ name: environment, tools });
      this.#definitions.set(environment, definition);
    }
    return definition;
  }

  /** The browser tools placed in `definition`, for a new session. */
  placements(definition: HostEnvironmentDefinition): ToolPlacement[] {
    return BROWSER_TOOLS.map(({ name, description, inputSchema }) => tool({ name, description, inputSchema, environment: definition }));
  }

  /**
   * Serves a host environment of the session from this tab, until stopped or the session
   * ends. Serving one that is served already answers the same connection: a second would
   * replace the first at the service, and the first would then stop for good.
   */
  serve(session: Session, environment: string): HostConnection {
    const key = `${session.id}/${environment}`;
    const current = this.#served.get(key);
    if (current && current.connection.state !== "closed") return current.connection;
    const connection = session.serve(this.definition(environment));
    connection.onStateChange(() => this.#changed());
    this.#served.set(key, { sessionId: session.id, environment, connection });
    this.#changed();
    return connection;
  }

  connectionOf(sessionId: string, environment: string): HostConnection | undefined {
    return this.#served.get(`${sessionId}/${environment}`)?.connection;
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.served.map(({ connection }) => connection.stop()));
  }

  /** Shows the question to the person and waits for their answer; a cancelled call withdraws it. */
  ask(text: string, context: HostToolContext): Promise<{ answer: string }> {
    return new Promise((resolve, reject) => {
      const withdraw = () => {
        this.#questions.splice(this.#questions.indexOf(question), 1);
        context.signal.removeEventListener("abort", cancelled);
        this.#changed();
      };
      const cancelled = () => {
        withdraw();
        reject(context.signal.reason);
      };
      const question: Question = {
        operationId: context.operationId,
        sessionId: context.sessionId,
        text,
        answer: (answer) => {
          withdraw();
          resolve({ answer });
        },
        decline: () => {
          withdraw();
          // A { code, message } thrown by a handler is the tool's failure with that code.
          reject({ code: "declined", message: "the user declined to answer" });
        },
      };
      context.signal.addEventListener("abort", cancelled, { once: true });
      this.#questions.push(question);
      this.#changed();
    });
  }

  /** The tool's handler, recording each call in the activity list. */
  #handler(browserTool: BrowserTool): HostToolHandler {
    return async (input, context) => {
      const activity: Activity = {
        operationId: context.operationId,
        sessionId: context.sessionId,
        tool: browserTool.name,
        input,
        startedAt: new Date(),
        state: "running",
        output: undefined,
      };
      this.#activity.unshift(activity);
      this.#activity.splice(ACTIVITY_KEPT);
      this.#changed();
      try {
        activity.output = await browserTool.handler(input, context, this);
        activity.state = "returned";
        return activity.output;
      } catch (error) {
        activity.state = "failed";
        activity.output = error instanceof Error ? error.message : error;
        throw error;
      } finally {
        this.#changed();
      }
    };
  }

  #changed(): void {
    for (const listener of this.#listeners) listener();
  }
}
