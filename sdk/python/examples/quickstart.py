"""Quickstart (seed 003 §9.1): a sandbox from a template, a command in it, cleanup.

Run it against a daemon (``make run``) at $AGENT2ENV_URL, default
http://localhost:8080/api/v1.
"""

from agent2env import Client, ConflictError
from agent2env.models import CreateTemplateRequest, TemplateSpec


def main() -> None:
    client = Client()

    # The template the seed's example uses; agent2env/python is a built-in image.
    try:
        client.template.create(
            CreateTemplateRequest(
                name="python-data-science", spec=TemplateSpec(image="agent2env/python")
            )
        )
    except ConflictError:
        pass  # made before

    # Create a sandbox from the template
    sandbox = client.sandbox.create(
        template="python-data-science",
        overrides={"ttl": 7200, "env": {"DEBUG": "true"}},
    )
    print(f"Created sandbox: {sandbox.id}")

    # Wait until it runs (the first use of an image unpacks it)
    sandbox = client.sandbox.wait_for_ready(sandbox.id, timeout=900)
    print(f"Sandbox status: {sandbox.status}")

    # Run a command
    result = client.sandbox.execute(
        sandbox.id,
        command=["python", "-c", "import os; print('Hello from sandbox!', os.environ['DEBUG'])"],
    )
    print(f"Output: {result.stdout}", end="")

    # Clean up
    client.sandbox.delete(sandbox.id)
    client.close()


if __name__ == "__main__":
    main()
