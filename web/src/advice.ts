// What to do about an error of the API: the line an error box shows under
// its message, by the error's status and code and by what the page asked
// for.

/** What a 404's code says is missing. NOT_FOUND and FILE_NOT_FOUND name no kind: the page says which. */
const missingByCode: Record<string, Kind> = {
  SANDBOX_NOT_FOUND: "sandbox",
  SESSION_NOT_FOUND: "session",
  CONTEXT_NOT_FOUND: "context",
  TEMPLATE_NOT_FOUND: "template",
  VERSION_NOT_FOUND: "template version",
  PREPULL_NOT_FOUND: "prepull task",
  IMAGE_NOT_FOUND: "image",
  FILE_NOT_FOUND: "file or folder",
};

/** Each kind of thing the API can answer 404 for, and what to say of one that is not there. */
const missing = {
  sandbox: "There is no such sandbox: it may have been deleted, or its TTL may have run out.",
  session: "There is no such session: it may have been stopped, or its idle timeout may have run out.",
  context: "There is no such context: it may have been deleted, or its sandbox may have gone.",
  template: "There is no template of this name: the Templates page lists those there are.",
  "template version": "The template has no such version: its page lists the versions it has.",
  "prepull task": "There is no such prepull task: it may have been removed.",
  image: "There is no image of this name: check its name, and its registry.",
  "file or folder": "There is no file or folder at this path in the sandbox.",
  file: "There is no file at this path in the sandbox: it may have been moved or removed since it was listed.",
  folder: "There is no folder at this path in the sandbox: type another path, or go Up.",
  run: "There is no run with this id: it may have been deleted.",
  snapshot: "There is no such snapshot: it may have been deleted.",
};

/** A kind of thing a page asks the API for. */
export type Kind = keyof typeof missing;

/**
 * The advice for an error of the API with status and code, of a request
 * for a thing of kind asked (when the page says): of a 404, what is not
 * there is the kind the code names when it names one (a file or folder:
 * the page's file or folder), else the page's. "" when there is nothing to
 * add to the error's own message.
 */
export function advice(status: number | undefined, code: string | undefined, asked?: Kind): string {
  if (status === 0) return "Start the daemon (agent2env serve) or check the address the console was given.";
  if (status === 403) return "This key may not do that, or the API does not trust this console's origin.";
  if (status !== 404) return "";
  let kind = missingByCode[code ?? ""] ?? asked;
  if (kind === "file or folder" && (asked === "file" || asked === "folder")) kind = asked;
  return kind ? missing[kind] : "";
}
