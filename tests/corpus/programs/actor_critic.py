"""Actor-critic: separate actor and critic networks with their own optimizers, one update of
each per iteration, on a made-up environment (random states and rewards)."""

import torch
import torch.nn as nn
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
S, A, B, ITERS = 4, 3, 16, 6

actor = nn.Sequential(nn.Linear(S, 32), nn.Tanh(), nn.Linear(32, A))
critic = nn.Sequential(nn.Linear(S, 32), nn.Tanh(), nn.Linear(32, 1))
opt_actor = torch.optim.Adam(actor.parameters(), lr=1e-3)
opt_critic = torch.optim.Adam(critic.parameters(), lr=1e-3)
for it in range(ITERS):
    states, rewards = torch.randn(B, S), torch.randn(B)
    dist = torch.distributions.Categorical(logits=actor(states))
    actions = dist.sample()
    values = critic(states).squeeze(-1)
    advantage = rewards - values.detach()
    actor_loss = -(dist.log_prob(actions) * advantage).mean()
    critic_loss = (rewards - values).pow(2).mean()
    opt_actor.zero_grad()
    actor_loss.backward()
    opt_actor.step()
    opt_critic.zero_grad()
    critic_loss.backward()
    opt_critic.step()
    truth.loss(it, actor_loss)
    truth.loss(it, critic_loss)
truth.saved(critic)
models = [["actor", truth.params(actor)], ["critic", truth.params(critic)]]
truth.report(
    actor, steps=ITERS, samples_per_step=B, models=models, N=sum(n for _, n in models)
)
