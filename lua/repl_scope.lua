-- The REPL's session scope: the locals a chunk declared at its top level, kept for the chunks
-- after it (src/front/locals.rs rewrites `local n = 6` into `;__lmcp_local(true,"n"); n = 6`).
--
-- Each chunk runs with its own environment table. A name it looks up is one of the session's
-- slots visible when the chunk began (or that it declared since), else a global of the script
-- environment `G`; an assignment goes to the slot of that name, else to the global. A slot is
-- a table cell, so every chunk and every closure that sees it shares it; a later declaration
-- of the same name makes a new cell for the chunks after it, and closures made earlier keep the
-- old one, as Lua's shadowing does. This chunk is the host's: it runs once per session, with
-- what it needs passed in, and returns the function that makes a chunk's environment and the
-- one that lists the slots (for completion).

local G, setmeta, next_, select_, error_ = ...

-- name -> cell ({ v = value, const = the environment that declared it <const> })
local visible = {}

local function new_scope()
  local own = {}
  for k, c in next_, visible do
    own[k] = c
  end
  local env = {}
  local function declare(init, ...)
    for i = 1, select_("#", ...) do
      local k = select_(i, ...)
      local c = {}
      if init then
        -- a slot starts with the value its name had (`local x = x`, `local a, b = b, a`)
        c.v = env[k]
      end
      own[k] = c
      visible[k] = c
    end
  end
  local function const(...)
    for i = 1, select_("#", ...) do
      own[select_(i, ...)].const = env
    end
  end
  setmeta(env, {
    __index = function(_, k)
      local c = own[k]
      if c then
        return c.v
      end
      if k == "__lmcp_local" then
        return declare
      elseif k == "__lmcp_const" then
        return const
      end
      return G[k]
    end,
    __newindex = function(_, k, v)
      local c = own[k]
      if c then
        if c.const and c.const ~= env then
          error_("attempt to assign to const variable '" .. k .. "'", 2)
        end
        c.v = v
      else
        G[k] = v
      end
    end,
    __metatable = false,
  })
  return env
end

local function slots()
  local out = {}
  for k, c in next_, visible do
    out[k] = c.v
  end
  return out
end

return new_scope, slots
