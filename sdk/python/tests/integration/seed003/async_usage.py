import asyncio
from agent2env import AsyncClient

async def main():
    async with AsyncClient("http://localhost:8080/api/v1") as client:
        # 创建沙箱
        sandbox = await client.sandbox.create(template="python-data-science")

        # 等待就绪
        sandbox = await client.sandbox.wait_for_ready(sandbox.id)

        # 执行命令
        result = await client.sandbox.execute(
            sandbox.id,
            command=["python", "-c", "print('Hello!')"],
        )
        print(result.stdout)

        # 清理
        await client.sandbox.delete(sandbox.id)

asyncio.run(main())
