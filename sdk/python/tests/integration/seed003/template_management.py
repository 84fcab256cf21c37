from agent2env import Client
from agent2env.models import CreateTemplateRequest, TemplateSpec, ResourceSpec

client = Client("http://localhost:8080/api/v1")

# 创建模板
template = client.template.create(
    CreateTemplateRequest(
        name="my-python-template",
        display_name="My Python Template",
        description="Custom Python environment",
        tags=["python", "custom"],
        spec=TemplateSpec(
            image="agent2env/python",
            resources=ResourceSpec(cpu="1000m", memory="1Gi"),
            ttl=7200,
            startup_script="pip install numpy pandas",
        ),
        auto_prepull=True,
    )
)
print(f"Created template: {template.name} v{template.latest_version}")

# 列出模板
templates = client.template.list(tag="python")
for t in templates.items:
    print(f"- {t.name}: {t.description}")

# 导出模板
yaml_content = client.template.export_yaml("my-python-template")
print(yaml_content.decode())

client.close()
