"""Templates (seed 003 §9.3 and on): create, list, versions, rollback, YAML export and import.

Run it against a daemon (``make run``) at $AGENT2ENV_URL, default
http://localhost:8080/api/v1.
"""

from agent2env import Client, NotFoundError
from agent2env.models import (
    CreateTemplateRequest,
    ImportStrategy,
    ResourceSpec,
    TemplateSpec,
    UpdateTemplateRequest,
)

NAME = "example-python-template"


def main() -> None:
    client = Client()
    try:
        client.template.delete(NAME)  # left by an earlier run
    except NotFoundError:
        pass

    template = client.template.create(
        CreateTemplateRequest(
            name=NAME,
            display_name="Example Python Template",
            description="Custom Python environment",
            tags=["python", "example"],
            spec=TemplateSpec(
                image="agent2env/python",
                resources=ResourceSpec(cpu="1000m", memory="1Gi"),
                ttl=7200,
                startup_script="echo ready > /workspace/ready.txt",
            ),
        )
    )
    print(f"Created template: {template.name} v{template.latest_version}")

    # The image ahead of the first sandbox.
    task = client.prepull.create_for_template(NAME)
    task = client.prepull.wait_for_completion(task.id, poll_interval=0.5)
    print(f"Prepull {task.id}: {task.status}")

    # Each update is a new version; a rollback copies an old spec into a new one.
    client.template.update(
        NAME,
        UpdateTemplateRequest(
            spec=TemplateSpec(image="agent2env/python", ttl=600), changelog="shorter ttl"
        ),
    )
    for version in client.template.list_versions(NAME).items:
        print(f"  v{version.version}: {version.changelog} (ttl {version.spec.ttl})")
    rollback = client.template.rollback(NAME, 1, changelog="back to v1")
    print(f"Rolled back to v{rollback.rolled_back_to}, now v{rollback.latest_version}")

    for t in client.template.list(tag="example").items:
        print(f"- {t.name}: {t.description}")

    # YAML out, and back in after the template is gone.
    yaml_content = client.template.export_yaml(NAME)
    print(yaml_content.decode())
    client.template.delete(NAME)
    result = client.import_export.import_templates(
        yaml_content, strategy=ImportStrategy.CREATE_ONLY
    )
    print(f"Imported: {[(r.name, r.action.value) for r in result.results]}")
    print(client.import_export.export_all(names=[NAME]).decode().splitlines()[1])

    client.template.delete(NAME)
    client.close()


if __name__ == "__main__":
    main()
