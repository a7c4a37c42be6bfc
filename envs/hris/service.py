"""HRIS: a BambooHR-like employee directory, org chart and job records of the home company.

Employees are the people of the shared world, keyed by their employee id (``E1001``...), with
their name, work email, phone, department, job title, manager, location, hire date, status
("active", "on_leave" or "terminated") and employment type. Departments have a head. Every hire,
job change, transfer, status change and termination is written to the employee's job history.

The org chart is a tree: the CEO has no manager, department heads report to the CEO and everyone
else reports to someone above them. Rules an HR admin expects: work emails are unique; a manager
must be an active employee; a manager change may not make anyone their own (indirect) manager;
a department head stays in their department until someone else heads it; a terminated employee
cannot be changed (rehire them as a new employee); nobody is terminated while people who are
not terminated still report to them, or while they head a department; a termination is not dated before the
hire; only supplied fields change on an update.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from typing import Literal

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Email, Text
from compoworld.runtime.query import select
from compoworld.runtime.state import Record, ServiceState, Table
from envs._world import DEPARTMENTS, world

Status = Literal["active", "on_leave", "terminated"]
EmploymentType = Literal["full_time", "part_time", "contractor"]
ChangeKind = Literal["hire", "job_change", "transfer", "status", "termination"]
#: The port tags of what an employee record holds: what hiring takes and a read yields.
EMPLOYEE_PORTS = (
  "person.name",
  "person.email",
  "person.phone",
  "department",
  "job.title",
  "city",
  "date",
)


class Employee(Record):
  id: str  # the employee id, e.g. E1042
  name: str
  email: str
  phone: str = ""
  department: str
  title: str
  manager_id: str | None = None  # None only for the CEO
  location: str
  hire_date: date
  termination_date: date | None = None
  status: Status = "active"
  employment_type: EmploymentType = "full_time"
  updated_at: datetime


class Department(Record):
  id: str  # the department's name, e.g. "Engineering"
  head_id: str | None = None


class JobChange(Record):
  employee_id: str
  kind: ChangeKind
  effective_date: date
  title: str
  department: str
  manager_id: str | None = None
  status: Status = "active"
  note: str = ""
  recorded_at: datetime  # orders changes that take effect on the same day


class HrisState(ServiceState):
  employees: Table[Employee]
  departments: Table[Department]
  job_history: Table[JobChange]


LEAVE_NOTES = ("Parental leave", "Medical leave", "Sabbatical")
EXIT_NOTES = ("Resigned: new opportunity", "Resigned: relocation", "End of contract")


@registry.register
class HrisService(Service):
  name = "hris"
  domain = "hr"
  description = (
    "Employee directory and org chart: hire, change jobs, transfer, set leave, terminate."
  )
  State = HrisState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> HrisState:
    rng = random.Random(f"{cls.name}:{seed}")
    count = max(size if size is not None else 60, 2)
    # A bigger world keeps its first 60 people: the same people other services see.
    w = world(seed) if count <= 60 else world(seed, population=min(count, 1200))
    people = w.people[:count]
    state = HrisState.empty(seed)
    ids = {p.email: p.employee_id for p in people}
    managers = {p.manager_email for p in people}
    for dept in DEPARTMENTS:
      head = next((p for p in people[2:] if p.department == dept), None)
      state.departments.insert(Department(id=dept, head_id=head.employee_id if head else None))
    for i, p in enumerate(people):
      hired = date.fromisoformat(p.hired)
      status, left, note = "active", None, ""
      # Only people nobody reports to can be away or gone: the org chart stays valid.
      if i > 1 and p.email not in managers:
        roll = rng.random()
        if roll < 0.07:
          status, note = "on_leave", rng.choice(LEAVE_NOTES)
        elif roll < 0.13:
          status, note = "terminated", rng.choice(EXIT_NOTES)
          left = state.now.date() - timedelta(days=rng.randint(5, 120))
          hired = min(hired, left - timedelta(days=90))
      kind = rng.choices(("full_time", "part_time", "contractor"), (0.85, 0.08, 0.07))[0]
      hired_as = Employee(
        id=p.employee_id,
        name=p.name,
        email=p.email,
        phone=p.phone,
        department=p.department,
        title=p.title,
        manager_id=ids.get(p.manager_email) if p.manager_email else None,
        location=p.city,
        hire_date=hired,
        employment_type="full_time" if p.email in managers else kind,
        updated_at=state.now - timedelta(days=rng.randint(1, 60)),
      )
      cls._log(state, hired_as, "hire", hired, "Hired")
      emp = hired_as.with_changes(status=status, termination_date=left)
      state.employees.insert(emp)
      if status != "active":
        day = left or state.now.date() - timedelta(days=rng.randint(3, 40))
        cls._log(state, emp, "termination" if left else "status", day, note)
    return state

  # --- helpers -----------------------------------------------------------------------------

  @staticmethod
  def _log(state: HrisState, emp: Employee, kind: ChangeKind, day: date, note: str) -> None:
    state.job_history.insert(
      JobChange(
        id=state.new_id("job"),
        employee_id=emp.id,
        kind=kind,
        effective_date=day,
        title=emp.title,
        department=emp.department,
        manager_id=emp.manager_id,
        status=emp.status,
        note=note,
        recorded_at=state.now,
      )
    )

  def _current(self, employee_id: str) -> Employee:
    emp = self.state.employees.get(employee_id)
    if emp.status == "terminated":
      raise Conflict(
        f"employee '{employee_id}' ({emp.name}) was terminated on {emp.termination_date} and "
        "cannot be changed; rehire them with hire_employee"
      )
    return emp

  def _manager(self, manager_id: str) -> Employee:
    boss = self.state.employees.get(manager_id)
    if boss.status != "active":
      raise Conflict(
        f"manager '{manager_id}' ({boss.name}) is {boss.status}; a manager must be an active "
        "employee"
      )
    return boss

  def _reports(self, employee_id: str, include_terminated: bool = False) -> list[Employee]:
    return sorted(
      self.state.employees.filter(
        lambda e: e.manager_id == employee_id and (include_terminated or e.status != "terminated")
      ),
      key=lambda e: e.id,
    )

  def _headed(self, employee_id: str) -> str | None:
    return next((d.id for d in self.state.departments if d.head_id == employee_id), None)

  def _change_job(
    self,
    employee_id: str,
    kind: ChangeKind,
    effective_date: date | None,
    note: str,
    title: str | None = None,
    department: str | None = None,
    manager_id: str | None = None,
  ) -> Employee:
    emp = self._current(employee_id)
    if department is not None:
      self.state.departments.get(department)
      headed = self._headed(employee_id)
      if headed is not None and department != emp.department:
        raise Conflict(
          f"employee '{employee_id}' heads {headed}; name a new head with set_department_head "
          "before moving them to another department"
        )
    if manager_id is not None:
      self._manager(manager_id)
      # Walk up from the new manager: meeting the employee would close a loop.
      node: str | None = manager_id
      while node is not None:
        if node == employee_id:
          raise Conflict(
            f"'{manager_id}' reports (directly or indirectly) to '{employee_id}'; making them "
            f"{employee_id}'s manager would create a reporting cycle"
          )
        node = self.state.employees.get(node).manager_id
    changes = {
      k: v
      for k, v in dict(title=title, department=department, manager_id=manager_id).items()
      if v is not None and v != getattr(emp, k)
    }
    if not changes:
      raise Conflict(f"employee '{employee_id}' already has that title, department and manager")
    new = self.state.employees.update(employee_id, updated_at=self.state.now, **changes)
    self._log(self.state, new, kind, effective_date or self.state.now.date(), note)
    return new

  # --- reads -------------------------------------------------------------------------------

  @tool(
    mutates=False,
    page="employee",
    produces=("employee.id", "person.name", "person.email", "department", "job.title", "city"),
  )
  def search_employees(
    self,
    query: str | None = None,
    department: str | None = None,
    title: str | None = None,
    status: Status | None = None,
    manager_id: str | None = None,
    location: str | None = None,
    employment_type: EmploymentType | None = None,
  ) -> list:
    """Search the employee directory in employee-id order. Terminated employees are listed only
    when asked for with status "terminated".

    Args:
      query: words that must all appear in the name, email or title.
      department: only employees of this department (e.g. "Engineering").
      title: only employees whose job title contains this text (any letter case).
      status: only employees with this status ("active", "on_leave" or "terminated").
      manager_id: only direct reports of this employee id.
      location: only employees in this city.
      employment_type: only "full_time", "part_time" or "contractor" employees.
    """
    self.state.departments.check(department)
    self.state.employees.check(manager_id)
    return select(
      self.state.employees,
      eq={"department": department, "manager_id": manager_id, "employment_type": employment_type},
      same={"location": location},
      text=query,
      fields=("name", "email", "title"),
      where=lambda e: (
        (e.status == status if status else e.status != "terminated")
        and (title is None or title.lower() in e.title.lower())
      ),
      key=lambda e: e.id,
    )

  @tool(
    mutates=False,
    produces=("employee.id", *EMPLOYEE_PORTS, "status"),
  )
  def get_employee(self, employee_id: str) -> Employee:
    """Get one employee's full record: contact details, job, manager, location and status.

    Args:
      employee_id: the employee id, e.g. "E1042".
    """
    return self.state.employees.get(employee_id)

  @tool(mutates=False, consumes=("person.email",), produces=("employee.id", "person.name"))
  def find_employee_by_email(self, email: Email) -> Employee:
    """Look up an employee (terminated ones included) by work email address.

    Args:
      email: the employee's work email address (any letter case).
    """
    wanted = email.lower()
    return self.state.employees.get_by(f"no employee has the email '{email}'", email=wanted)

  @tool(mutates=False, consumes=("employee.id",), produces=("employee.id", "person.email"))
  def get_direct_reports(self, employee_id: str, include_terminated: bool = False) -> list:
    """List the people who report directly to an employee, in employee-id order.

    Args:
      employee_id: the manager's employee id.
      include_terminated: also list former reports who were terminated.
    """
    self.state.employees.get(employee_id)
    return self._reports(employee_id, include_terminated)

  @tool(mutates=False, consumes=("employee.id",), produces=("employee.id", "person.email"))
  def get_reporting_chain(self, employee_id: str) -> list:
    """List an employee's managers from their direct manager up to the CEO (empty for the CEO).

    Args:
      employee_id: the employee id.
    """
    chain, node = [], self.state.employees.get(employee_id).manager_id
    while node is not None:
      boss = self.state.employees.get(node)
      chain.append(boss)
      node = boss.manager_id
    return chain

  @tool(mutates=False, produces=("department", "employee.id", "person.email", "number"))
  def list_departments(self) -> list:
    """List the departments with their head and headcount (active and on-leave employees)."""
    out = []
    for dept in sorted(self.state.departments, key=lambda d: d.id):
      head = self.state.employees.find(dept.head_id) if dept.head_id else None
      out.append(
        {
          "name": dept.id,
          "head_id": dept.head_id,
          "head_name": head.name if head else None,
          "head_email": head.email if head else None,
          "headcount": sum(
            1 for e in self.state.employees if e.department == dept.id and e.status != "terminated"
          ),
        }
      )
    return out

  @tool(mutates=False, consumes=("employee.id",), produces=("date", "job.title", "department"))
  def get_job_history(self, employee_id: str) -> list:
    """List an employee's job history (hire, job changes, transfers, leave, termination), oldest
    first.

    Args:
      employee_id: the employee id.
    """
    self.state.employees.get(employee_id)
    return sorted(
      self.state.job_history.filter(lambda c: c.employee_id == employee_id),
      key=lambda c: (c.effective_date, c.recorded_at, c.id),
    )

  # --- writes ------------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=EMPLOYEE_PORTS,
    produces=("employee.id",),
  )
  def hire_employee(
    self,
    name: Text,
    email: Email,
    department: str,
    title: Text,
    manager_id: str,
    location: Text,
    hire_date: date | None = None,
    employment_type: EmploymentType = "full_time",
    phone: str = "",
  ) -> Employee:
    """Add a new employee; they get the next free employee id.

    Args:
      name: full name.
      email: work email address; no other employee may have it.
      department: the department they join (e.g. "Sales").
      title: job title.
      manager_id: employee id of their manager, who must be active.
      location: the city they work from.
      hire_date: first working day (ISO date); today by default.
      employment_type: "full_time", "part_time" or "contractor".
      phone: phone number.
    """
    self.state.departments.get(department)
    self._manager(manager_id)
    address = email.lower()
    taken = self.state.employees.find_by(email=address)
    if taken is not None:
      raise Conflict(
        f"email '{address}' already belongs to employee '{taken.id}' ({taken.name}, "
        f"{taken.status}); work emails must be unique"
      )
    number = max((int(e.id[1:]) for e in self.state.employees if e.id[1:].isdigit()), default=1000)
    emp = self.state.employees.insert(
      Employee(
        id=f"E{number + 1}",
        name=name,
        email=address,
        phone=phone,
        department=department,
        title=title,
        manager_id=manager_id,
        location=location,
        hire_date=hire_date or self.state.now.date(),
        employment_type=employment_type,
        updated_at=self.state.now,
      )
    )
    self._log(self.state, emp, "hire", emp.hire_date, "Hired")
    return emp

  @tool(mutates=True, consumes=("employee.id", "job.title", "department", "date"))
  def update_job(
    self,
    employee_id: str,
    title: Text | None = None,
    department: str | None = None,
    manager_id: str | None = None,
    effective_date: date | None = None,
    note: str = "",
  ) -> Employee:
    """Change an employee's title, department or manager; only supplied fields change.

    Args:
      employee_id: the employee id.
      title: new job title.
      department: new department.
      manager_id: employee id of the new manager (active, and not someone who reports to this
        employee).
      effective_date: when the change takes effect (ISO date); today by default.
      note: reason for the change, e.g. "Promotion".
    """
    if title is None and department is None and manager_id is None:
      raise InvalidArgument("update_job: supply at least one of title, department or manager_id")
    return self._change_job(
      employee_id, "job_change", effective_date, note, title, department, manager_id
    )

  @tool(mutates=True, consumes=("employee.id", "department", "date"))
  def transfer_department(
    self,
    employee_id: str,
    department: str,
    manager_id: str | None = None,
    effective_date: date | None = None,
  ) -> Employee:
    """Move an employee to another department; their new manager is the department's head
    unless another manager is given.

    Args:
      employee_id: the employee id.
      department: the department they move to.
      manager_id: employee id of the new manager; the new department's head by default.
      effective_date: when the transfer takes effect (ISO date); today by default.
    """
    emp = self._current(employee_id)
    target = self.state.departments.get(department)
    if emp.department == department:
      raise Conflict(f"employee '{employee_id}' is already in {department}")
    if manager_id is None:
      manager_id = target.head_id
      if manager_id is None:
        raise Conflict(f"{department} has no head to report to; give a manager_id")
    note = f"Transfer to {department}"
    return self._change_job(
      employee_id, "transfer", effective_date, note, None, department, manager_id
    )

  @tool(mutates=True, consumes=("employee.id", "department"))
  def set_department_head(self, department: str, employee_id: str) -> Department:
    """Make an active employee of a department its head.

    Args:
      department: the department's name.
      employee_id: the employee id of the new head; they must work in that department.
    """
    dept = self.state.departments.get(department)
    emp = self._current(employee_id)
    if emp.status != "active":
      raise Conflict(f"employee '{employee_id}' is {emp.status}; a head must be active")
    if emp.department != department:
      raise Conflict(
        f"employee '{employee_id}' works in {emp.department}, not {department}; transfer them first"
      )
    if dept.head_id == employee_id:
      raise Conflict(f"employee '{employee_id}' already heads {department}")
    return self.state.departments.update(department, head_id=employee_id)

  @tool(mutates=True, consumes=("employee.id", "status"))
  def set_status(
    self, employee_id: str, status: Literal["active", "on_leave"], note: str = ""
  ) -> Employee:
    """Put an employee on leave or bring them back to active (terminate with
    terminate_employee).

    Args:
      employee_id: the employee id.
      status: "on_leave" or "active".
      note: reason, e.g. "Parental leave".
    """
    emp = self._current(employee_id)
    if emp.status == status:
      raise Conflict(f"employee '{employee_id}' is already {status}")
    new = self.state.employees.update(employee_id, status=status, updated_at=self.state.now)
    self._log(self.state, new, "status", self.state.now.date(), note)
    return new

  @tool(mutates=True, consumes=("employee.id", "date"))
  def terminate_employee(
    self, employee_id: str, termination_date: date | None = None, reason: str = ""
  ) -> Employee:
    """Terminate an employee. Their active direct reports must first be moved to another
    manager, and a department head must first be replaced.

    Args:
      employee_id: the employee id.
      termination_date: last working day (ISO date), not before the hire date; today by default.
      reason: why they leave, e.g. "Resigned".
    """
    emp = self._current(employee_id)
    day = termination_date or self.state.now.date()
    if day < emp.hire_date:
      raise InvalidArgument(
        f"termination_date ({day}) must not be before the hire date ({emp.hire_date})"
      )
    reports = self._reports(employee_id)
    if reports:
      raise Conflict(
        f"employee '{employee_id}' still has {len(reports)} direct report(s) "
        f"({', '.join(r.id for r in reports)}); reassign them with update_job first"
      )
    headed = self._headed(employee_id)
    if headed is not None:
      raise Conflict(
        f"employee '{employee_id}' heads {headed}; name a new head with set_department_head first"
      )
    new = self.state.employees.update(
      employee_id, status="terminated", termination_date=day, updated_at=self.state.now
    )
    self._log(self.state, new, "termination", day, reason)
    return new
