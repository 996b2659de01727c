import { describeFailure, isUnauthenticated } from "../connection.ts";
import { h, replaceChildren } from "../dom.ts";

/**
 * The sign-in card. `signIn` checks a key and keeps it; `notice` says why the person is here
 * again (a key the service stopped accepting).
 */
export function signInView(signIn: (apiKey: string) => Promise<void>, notice?: string): HTMLElement {
  const key = h("input", { type: "password", name: "apiKey", autocomplete: "off", spellcheck: "false", required: true });
  const submit = h("button", { type: "submit" }, "Sign in");
  const message = h("p", { class: "error", role: "alert" }, notice);
  const onSubmit = async (event: Event) => {
    event.preventDefault();
    submit.disabled = true;
    replaceChildren(message);
    try {
      await signIn(key.value.trim());
    } catch (error) {
      replaceChildren(message, isUnauthenticated(error) ? "The service does not accept this key." : describeFailure(error));
      submit.disabled = false;
    }
  };
  return h(
    "main",
    { class: "sign-in" },
    h(
      "form",
      { class: "card", onsubmit: (event) => void onSubmit(event) },
      h("h1", null, "skillenv console"),
      h("p", null, "Skills, sessions and runs of your workspace, and this tab as a host for your sessions' tools."),
      h("label", null, "API key", key),
      submit,
      message,
      h(
        "p",
        { class: "fine-print" },
        "The key stays in this tab (sessionStorage, gone when the tab closes) and is sent only in the Authorization header of the console's calls to this service. A service started without ",
        h("code", null, "SERVICE_API_KEYS"),
        " wrote a development key to ",
        h("code", null, "data/dev-api-key"),
        ".",
      ),
    ),
  );
}
