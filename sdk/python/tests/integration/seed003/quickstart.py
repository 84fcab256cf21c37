from agent2env import Client

# 创建客户端
client = Client("http://localhost:8080/api/v1")

# 从模板创建沙箱
sandbox = client.sandbox.create(
    template="python-data-science",
    overrides={"ttl": 7200, "env": {"DEBUG": "true"}},
)
print(f"Created sandbox: {sandbox.id}")

# 等待沙箱就绪
sandbox = client.sandbox.wait_for_ready(sandbox.id)
print(f"Sandbox status: {sandbox.status}")

# 执行命令
result = client.sandbox.execute(
    sandbox.id,
    command=["python", "-c", "print('Hello from sandbox!')"],
)
print(f"Output: {result.stdout}")

# 清理
client.sandbox.delete(sandbox.id)
client.close()
