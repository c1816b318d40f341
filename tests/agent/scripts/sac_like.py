"""Soft actor-critic's shape: an agent object holding an actor, twin Q critics in one module, a
target copy of the critics (never stepped) and a bare `log_alpha` tensor with its own optimizer;
three optimizers step per update. Three things trained, named by the agent's attributes."""

import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_num_threads(1)
S, A, B = 5, 2, 16


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.q1, self.q2 = nn.Linear(S + A, 1), nn.Linear(S + A, 1)

    def forward(self, s, a):
        x = torch.cat([s, a], -1)
        return self.q1(x), self.q2(x)


class Agent:
    def __init__(self):
        self.actor = nn.Sequential(nn.Linear(S, 32), nn.Tanh(), nn.Linear(32, A))
        self.critic = Critic()
        self.critic_target = Critic()
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=1e-3)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=1e-3)

    def update(self, s, a, r, s2):
        with torch.no_grad():
            a2 = torch.tanh(self.actor(s2))
            q1t, q2t = self.critic_target(s2, a2)
            y = r + 0.99 * torch.min(q1t, q2t)
        q1, q2 = self.critic(s, a)
        critic_loss = ((q1 - y) ** 2).mean() + ((q2 - y) ** 2).mean()
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        pi = torch.tanh(self.actor(s))
        q1p, _ = self.critic(s, pi)
        entropy_term = self.log_alpha.exp().detach() * pi.pow(2).sum(-1, keepdim=True)
        actor_loss = (entropy_term - q1p).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        alpha_loss = -(self.log_alpha * (pi.pow(2).sum(-1).detach() - A)).mean()
        self.alpha_opt.zero_grad()
        alpha_loss.backward()
        self.alpha_opt.step()
        return critic_loss


def count(module):
    return sum(p.numel() for p in module.parameters())


agent = Agent()
for _ in range(5):
    s, a, r, s2 = torch.randn(B, S), torch.randn(B, A), torch.randn(B, 1), torch.randn(B, S)
    print("LOSS", float(agent.update(s, a, r, s2).detach()))
print(f"TRUTH steps=5 samples={B} critic={count(agent.critic)} actor={count(agent.actor)}")
